package lockwarden

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func scratchListen(t *testing.T) (net.Listener, string) {
	p := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	return ln, p
}

func accept(t *testing.T, ln net.Listener) *fakeAgent {
	conn, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &fakeAgent{t: t, conn: conn, in: bufio.NewReader(conn)}
}

func (f *fakeAgent) next() map[string]any {
	f.t.Helper()
	f.conn.SetReadDeadline(time.Now().Add(eventWait))
	line, err := f.in.ReadBytes('\n')
	if err != nil {
		f.t.Fatal(err)
	}
	m := map[string]any{}
	json.Unmarshal(line, &m)
	return m
}

func TestScratchResumeOk(t *testing.T) {
	ln, p := scratchListen(t)
	c, err := Dial(p)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a1 := accept(t, ln)
	got := start(func(ctx context.Context) (*Lock, error) {
		return c.Acquire(ctx, "r", AcquireOptions{TTL: 3 * time.Second, Permits: 3, Fence: true, Renew: true})
	})
	m := a1.next()
	t.Logf("acquire %v", m)
	a1.send(`{"id":%v,"ok":true,"resource":"r","token":"tok","validity_ms":2900,"waited_ms":0,"fence":7,"mode":"permit","permit":2}`, m["id"])
	lock, err := await(t, got)
	if err != nil {
		t.Fatal(err)
	}
	// held poll after ~1s
	m = a1.next()
	t.Logf("poll %v", m)
	if m["op"] != "held" {
		t.Fatal(m)
	}
	a1.send(`{"id":%v,"ok":true,"locks":[{"resource":"r","token":"tok","validity_ms":2500,"renew":true}]}`, m["id"])
	time.Sleep(50 * time.Millisecond)
	t.Logf("valid for %v", time.Until(lock.ValidUntil()))
	a1.conn.Close()
	// ping fails while reconnecting? (new conn accepted immediately)
	a2 := accept(t, ln)
	m = a2.next()
	t.Logf("resume %v", m)
	a2.send(`{"id":%v,"ok":false,"error":"no_quorum","message":"x"}`, m["id"])
	m = a2.next()
	t.Logf("resume again %v", m)
	a2.send(`{"id":%v,"ok":true,"resource":"r","token":"tok","validity_ms":2950,"waited_ms":0,"fence":7,"mode":"permit","permit":2}`, m["id"])
	m = a2.next()
	t.Logf("next %v", m)
	if lock.Err() != nil {
		t.Fatal(lock.Err())
	}
	rel := start(func(ctx context.Context) (struct{}, error) { return struct{}{}, lock.Release(ctx) })
	if m["op"] == "held" {
		a2.send(`{"id":%v,"ok":true,"locks":[]}`, m["id"])
		m = a2.next()
	}
	t.Logf("release %v", m)
	a2.send(`{"id":%v,"ok":true}`, m["id"])
	if _, err := await(t, rel); err != nil {
		t.Fatal(err)
	}
}

func TestScratchResumeNotHeld(t *testing.T) {
	ln, p := scratchListen(t)
	c, _ := Dial(p)
	defer c.Close()
	a1 := accept(t, ln)
	got := start(func(ctx context.Context) (*Lock, error) {
		return c.Acquire(ctx, "r", AcquireOptions{Shared: true})
	})
	m := a1.next()
	a1.send(`{"id":%v,"ok":true,"resource":"r","token":"tok","validity_ms":29000,"waited_ms":0,"mode":"shared"}`, m["id"])
	lock, _ := await(t, got)
	a1.conn.Close()
	if err := c.Ping(context.Background()); err == nil {
		t.Fatal("ping ok")
	} else {
		t.Log(err)
	}
	time.Sleep(300 * time.Millisecond) // some failed dials? no: listener up, accepts
	a2 := accept(t, ln)
	m = a2.next()
	t.Logf("resume %v", m)
	a2.send(`{"id":%v,"ok":false,"error":"not_held","message":"gone"}`, m["id"])
	t.Log(waitLost(t, lock), lock.Err())
	// client still usable on new conn
	pg := start(func(ctx context.Context) (struct{}, error) { return struct{}{}, c.Ping(ctx) })
	m = a2.next()
	a2.send(`{"id":%v,"ok":true}`, m["id"])
	if _, err := await(t, pg); err != nil {
		t.Fatal(err)
	}
}

func TestScratchExpiresWhileDown(t *testing.T) {
	ln, p := scratchListen(t)
	c, _ := Dial(p)
	defer c.Close()
	a1 := accept(t, ln)
	got := start(func(ctx context.Context) (*Lock, error) {
		return c.Acquire(ctx, "r", AcquireOptions{TTL: time.Second})
	})
	m := a1.next()
	a1.send(`{"id":%v,"ok":true,"resource":"r","token":"tok","validity_ms":900,"waited_ms":0}`, m["id"])
	lock, _ := await(t, got)
	ln.Close()
	a1.conn.Close()
	t0 := time.Now()
	t.Log(waitLost(t, lock), lock.Err(), time.Since(t0))
	if !strings.Contains(lock.LostReason(), "agent_lost") {
		t.Fatal()
	}
	time.Sleep(100 * time.Millisecond)
	t.Log(c.Ping(context.Background()))
	t.Log(c.Close())
}

func TestScratchCloseWhileResuming(t *testing.T) {
	ln, p := scratchListen(t)
	c, _ := Dial(p)
	a1 := accept(t, ln)
	got := start(func(ctx context.Context) (*Lock, error) {
		return c.Acquire(ctx, "r", AcquireOptions{})
	})
	m := a1.next()
	a1.send(`{"id":%v,"ok":true,"resource":"r","token":"tok","validity_ms":29000,"waited_ms":0}`, m["id"])
	lock, _ := await(t, got)
	ln.Close()
	a1.conn.Close()
	time.Sleep(300 * time.Millisecond)
	t0 := time.Now()
	t.Log(c.Close(), time.Since(t0))
	t.Log(lock.LostReason())
}
