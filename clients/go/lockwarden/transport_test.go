// The client against a scripted fake agent on a Unix socket of its own: what the real agent
// cannot be made to do on demand (answer a release not_held before its lost event, break the
// protocol, send a reply longer than any fixed buffer). Needs no agent.

package lockwarden

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeAgent is the agent's end of one connection, driven by the test's goroutine.
type fakeAgent struct {
	t    *testing.T
	conn net.Conn
	in   *bufio.Reader
}

// withFakeAgent connects a client to a fake agent; both are closed at the end of the test.
func withFakeAgent(t *testing.T) (*Client, *fakeAgent) {
	t.Helper()
	ln, err := net.Listen("unix", filepath.Join(t.TempDir(), "fake.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := Dial(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	conn, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return c, &fakeAgent{t: t, conn: conn, in: bufio.NewReader(conn)}
}

// request reads the client's next request, which must be op, and returns its id.
func (f *fakeAgent) request(op string) int64 {
	f.t.Helper()
	f.conn.SetReadDeadline(time.Now().Add(eventWait))
	line, err := f.in.ReadBytes('\n')
	if err != nil {
		f.t.Fatalf("waiting for a %s request: %v", op, err)
	}
	var r struct {
		ID int64  `json:"id"`
		Op string `json:"op"`
	}
	if err := json.Unmarshal(line, &r); err != nil || r.Op != op {
		f.t.Fatalf("want a %s request, got %q (%v)", op, line, err)
	}
	return r.ID
}

func (f *fakeAgent) send(format string, args ...any) {
	f.t.Helper()
	f.conn.SetWriteDeadline(time.Now().Add(eventWait)) // a client that stopped reading fails
	if _, err := fmt.Fprintf(f.conn, format+"\n", args...); err != nil {
		f.t.Fatal(err)
	}
}

// closedByClient waits for the client to close its end of the connection.
func (f *fakeAgent) closedByClient() {
	f.t.Helper()
	f.conn.SetReadDeadline(time.Now().Add(eventWait))
	if _, err := f.in.ReadBytes('\n'); !errors.Is(err, io.EOF) {
		f.t.Fatalf("want the client to close the connection, got %v", err)
	}
}

type outcome[T any] struct {
	value T
	err   error
}

// start runs call on a goroutine of its own (while the test plays the agent); await takes its
// outcome.
func start[T any](call func(ctx context.Context) (T, error)) <-chan outcome[T] {
	ch := make(chan outcome[T], 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), eventWait)
		defer cancel()
		v, err := call(ctx)
		ch <- outcome[T]{v, err}
	}()
	return ch
}

func await[T any](t *testing.T, ch <-chan outcome[T]) (T, error) {
	t.Helper()
	select {
	case o := <-ch:
		return o.value, o.err
	case <-time.After(2 * eventWait):
		t.Fatal("the call never returned")
		panic("unreachable")
	}
}

// grant has the client acquire resource and the fake agent grant it with token.
func (f *fakeAgent) grant(c *Client, resource, token string) *Lock {
	f.t.Helper()
	acquiring := start(func(ctx context.Context) (*Lock, error) {
		return c.Acquire(ctx, resource, AcquireOptions{})
	})
	f.send(`{"id":%d,"ok":true,"resource":%q,"token":%q,"validity_ms":29000,"waited_ms":0}`,
		f.request("acquire"), resource, token)
	lock, err := await(f.t, acquiring)
	if err != nil {
		f.t.Fatal(err)
	}
	return lock
}

// sync returns once the client has read every line sent before (a ping's reply comes after).
func (f *fakeAgent) sync(c *Client) {
	f.t.Helper()
	ping := start(func(ctx context.Context) (struct{}, error) { return struct{}{}, c.Ping(ctx) })
	f.send(`{"id":%d,"ok":true}`, f.request("ping"))
	if _, err := await(f.t, ping); err != nil {
		f.t.Fatal(err)
	}
}

func TestReleaseAnsweredNotHeldMarksTheLockLost(t *testing.T) {
	c, agent := withFakeAgent(t)
	token := strings.Repeat("ab", 20)
	lock := agent.grant(c, "r", token)
	releasing := start(func(ctx context.Context) (struct{}, error) {
		return struct{}{}, lock.Release(ctx)
	})
	agent.send(`{"id":%d,"ok":false,"error":"not_held","message":"gone"}`,
		agent.request("release"))
	_, err := await(t, releasing)
	wantCode(t, err, CodeNotHeld)
	select {
	case <-lock.Lost():
	default:
		t.Fatal("a release answered not_held left the lock looking held or released")
	}
	if r := lock.LostReason(); r != CodeNotHeld {
		t.Fatalf("lost reason %q", r)
	}
	wantCode(t, lock.Err(), CodeLost)
	// The agent's lost event, behind the reply, changes nothing more.
	agent.send(`{"event":"lost","resource":"r","token":%q,"reason":"expired"}`, token)
	agent.sync(c)
	if r := lock.LostReason(); r != CodeNotHeld {
		t.Fatalf("lost reason %q after the event", r)
	}
	if err := lock.Release(context.Background()); err != nil { // lost: nothing to send
		t.Fatal(err)
	}
	agent.sync(c)
}

func TestAReleaseWhoseCtxEndsIsSettledByTheLateAnswer(t *testing.T) {
	for _, answer := range []string{`"ok":true`, `"ok":false,"error":"not_held","message":"gone"`} {
		c, agent := withFakeAgent(t)
		lock := agent.grant(c, "r", strings.Repeat("ab", 20))
		ctx, cancel := context.WithCancel(context.Background())
		releasing := make(chan error, 1)
		go func() { releasing <- lock.Release(ctx) }()
		id := agent.request("release") // on the wire; now the caller gives up
		cancel()
		if err := <-releasing; !errors.Is(err, context.Canceled) {
			t.Fatalf("Release whose ctx ended: %v", err)
		}
		agent.send(`{"id":%d,%s}`, id, answer)
		// The answer settles the lock in Release's goroutine: await that (no event says so).
		var released bool
		var reason string
		for deadline := time.Now().Add(eventWait); time.Now().Before(deadline); {
			lock.mu.Lock()
			released, reason = lock.released, lock.reason
			lock.mu.Unlock()
			if released || reason != "" {
				break
			}
			time.Sleep(time.Millisecond)
		}
		if answer == `"ok":true` && (!released || reason != "") {
			t.Fatalf("answered ok: released %v, lost %q", released, reason)
		}
		if answer != `"ok":true` && (released || reason != CodeNotHeld) {
			t.Fatalf("answered not_held: released %v, lost %q", released, reason)
		}
		if err := lock.Release(context.Background()); err != nil { // settled: nothing to send
			t.Fatal(err)
		}
		agent.sync(c)
	}
}

func TestAnUndecodableLineEndsTheConnection(t *testing.T) {
	c, agent := withFakeAgent(t)
	lock := agent.grant(c, "r", strings.Repeat("ab", 20))
	ping := start(func(ctx context.Context) (struct{}, error) { return struct{}{}, c.Ping(ctx) })
	agent.send(`{"id":%d,"ok":true,}`, agent.request("ping"))
	_, err := await(t, ping)
	wantCode(t, err, CodeDisconnected)
	if !strings.Contains(err.Error(), "protocol") {
		t.Fatalf("the error does not say the agent broke the protocol: %v", err)
	}
	if r := waitLost(t, lock); r != CodeDisconnected {
		t.Fatalf("lost reason %q", r)
	}
	agent.closedByClient() // nothing reads it any more: the agent must see the end
	wantCode(t, c.Ping(context.Background()), CodeDisconnected)
}

func TestAReplyLongerThanAnyFixedBufferIsRead(t *testing.T) {
	c, agent := withFakeAgent(t)
	listing := start(func(ctx context.Context) ([]byte, error) {
		return c.Request(ctx, "locks", nil)
	})
	id := agent.request("locks")
	// Every lock held through the agent, as `locks` lists them: 40 000 of them here (~4 MiB).
	entries := make([]string, 40000)
	for i := range entries {
		entries[i] = fmt.Sprintf(`{"resource":"%s-%06d","session":%d,"pid":1,"uid":1000,`+
			`"held_ms":1,"validity_ms":29000,"renew":true,"waiters":0}`,
			strings.Repeat("r", 40), i, i)
	}
	line := fmt.Sprintf(`{"id":%d,"ok":true,"locks":[%s]}`, id, strings.Join(entries, ","))
	agent.send("%s", line)
	raw, err := await(t, listing)
	if err != nil {
		t.Fatal(err)
	}
	if string(raw) != line {
		t.Fatalf("a reply of %d bytes came back as %d bytes", len(line), len(raw))
	}
	agent.sync(c) // and the connection goes on
}

// An agent that cannot be reached: the error names the socket tried, and keeps its cause.
func TestDialErrorNamesTheSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no-agent.sock")
	_, err := Dial(path)
	var unreachable *UnreachableError
	if !errors.As(err, &unreachable) || unreachable.Path != path {
		t.Fatalf("Dial(%q) = %v, want an *UnreachableError with that path", path, err)
	}
	want := "lockwarden: cannot connect to the agent at " + path + ": connect: no such file or directory"
	if err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	if !errors.Is(err, syscall.ENOENT) {
		t.Errorf("errors.Is(%v, ENOENT) is false", err)
	}
}
