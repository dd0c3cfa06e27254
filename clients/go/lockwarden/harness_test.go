// Tests against a live agent at $LOCKWARDEN_SOCKET with real masters (skipped when it is
// unset).
//
// Run by tests/integration/clients_test.cc, which starts 5 redis-server masters and the agent,
// builds this with `go test -c` and runs the binary with LWTEST_CONTROL=stdio: a test that
// needs the masters changed prints `@@lw <action>` on stdout and reads the harness's answer
// from stdin (clients/README.md#tests). Without LWTEST_CONTROL, those tests are skipped.
package lockwarden

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

var (
	controlled = os.Getenv("LWTEST_CONTROL") == "stdio"
	answers    = bufio.NewReader(os.Stdin)
)

// These tests must pass the same way on a loaded machine (and against an ASan-built agent), so
// nothing here depends on how fast anything is: an acquire that must succeed waits (a free lock
// is granted at once; the wait only lets the agent retry when a master answered too slowly), an
// event is awaited with a generous deadline (only a failing test waits it out), and a validity is
// only checked to come from the ttl asked for (more than half of it), not to the ms.
const (
	waitLong  = 10 * time.Second
	eventWait = 15 * time.Second
	holdFor   = 50 * time.Millisecond // how long a queued waiter is kept waiting
)

// control asks the harness to act on the masters and returns its answer after "ok ".
func control(t *testing.T, action string) string {
	t.Helper()
	if !controlled {
		t.Skip("needs the harness (LWTEST_CONTROL=stdio)")
	}
	fmt.Fprintf(os.Stdout, "@@lw %s\n", action)
	line, err := answers.ReadString('\n')
	line = strings.TrimSpace(line)
	if err != nil || !strings.HasPrefix(line, "ok") {
		t.Fatalf("harness could not %s: %q %v", action, line, err)
	}
	return strings.TrimSpace(strings.TrimPrefix(line, "ok"))
}

func controlInt(t *testing.T, action string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(control(t, action), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// clients opens two connections (two sessions) closed at the end of the test.
func clients(t *testing.T) (*Client, *Client) {
	t.Helper()
	if os.Getenv("LOCKWARDEN_SOCKET") == "" {
		t.Skip("LOCKWARDEN_SOCKET is not set")
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	var cs [2]*Client
	for i := range cs {
		c, err := DialContext(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		cs[i] = c
	}
	return cs[0], cs[1]
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if !IsCode(err, code) {
		t.Fatalf("want a %q error, got %v", code, err)
	}
}

type heldLock struct {
	Resource   string `json:"resource"`
	ValidityMs int64  `json:"validity_ms"`
	Renew      bool   `json:"renew"`
	Waiters    int    `json:"waiters"`
}

// waitLost waits (eventWait at most) for the lock to be lost and returns the reason.
func waitLost(t *testing.T, lock *Lock) string {
	t.Helper()
	select {
	case <-lock.Lost():
		return lock.LostReason()
	case <-time.After(eventWait):
		t.Fatal("the lock was never reported lost")
		return ""
	}
}

func held(t *testing.T, c *Client) []heldLock {
	t.Helper()
	raw, err := c.Held(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var locks []heldLock
	if err := json.Unmarshal(raw, &locks); err != nil {
		t.Fatal(err)
	}
	return locks
}

// third opens one more connection, closed at the end of the test.
func third(t *testing.T) *Client {
	t.Helper()
	c, err := Dial("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitQueued returns once the agent lists a request of another connection waiting for resource.
func waitQueued(t *testing.T, c *Client, resource string) {
	t.Helper()
	deadline := time.Now().Add(eventWait)
	for {
		raw, err := c.Request(context.Background(), "locks", nil)
		if err != nil {
			t.Fatal(err)
		}
		var r struct{ Locks []heldLock }
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatal(err)
		}
		for _, l := range r.Locks {
			if l.Resource == resource && l.Waiters == 1 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("nobody queued for %s", resource)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
