// Elections against the live agent: campaign, resign, leader, observe, unobserve.

package lockwarden

import (
	"context"
	"os"
	"regexp"
	"testing"
	"time"
)

func TestElectionHandsOverOnResignWithAHigherTerm(t *testing.T) {
	a, b := clients(t)
	ctx := context.Background()
	first, err := a.Campaign(ctx, "go:elect", "host-a:1", CampaignOptions{TTL: 10 * time.Second,
		Wait: waitLong})
	if err != nil {
		t.Fatal(err)
	}
	if first.Term <= 0 || !regexp.MustCompile("^[0-9a-f]{40}$").MatchString(first.Token) {
		t.Fatalf("term %d token %q", first.Term, first.Token)
	}
	leader, err := b.Leader(ctx, "go:elect")
	if err != nil || leader == nil || leader.Value != "host-a:1" || leader.Term != first.Term ||
		leader.PID != os.Getpid() {
		t.Fatalf("leader %+v, %v", leader, err)
	}
	watcher, _ := clients(t)
	obs, err := watcher.Observe(ctx, "go:elect")
	if err != nil || obs.Initial == nil || obs.Initial.Value != "host-a:1" {
		t.Fatalf("observe %+v, %v", obs, err)
	}
	type result struct {
		lock *Lock
		err  error
	}
	waiting := make(chan result, 1)
	go func() {
		l, err := b.Campaign(ctx, "go:elect", "host-b:2", CampaignOptions{TTL: 10 * time.Second,
			Wait: 30 * time.Second})
		waiting <- result{l, err}
	}()
	waitQueued(t, a, "go:elect")
	select {
	case r := <-waiting:
		t.Fatalf("b elected while a leads: %+v", r)
	default:
	}
	if err := first.Release(ctx); err != nil { // resigns
		t.Fatal(err)
	}
	var second *Lock
	select {
	case r := <-waiting:
		if r.err != nil {
			t.Fatal(r.err)
		}
		second = r.lock
	case <-time.After(eventWait):
		t.Fatal("b was never elected")
	}
	if second.Term <= first.Term {
		t.Fatalf("term %d after %d", second.Term, first.Term)
	}
	if l, err := a.Leader(ctx, "go:elect"); err != nil || l == nil || l.Value != "host-b:2" {
		t.Fatalf("leader %+v, %v", l, err)
	}
	for { // events come in term order: wait for the one naming b
		select {
		case e, ok := <-obs.Events():
			if !ok {
				t.Fatalf("events ended: %v", obs.Err())
			}
			if e.Term < first.Term {
				t.Fatalf("event of term %d after %d", e.Term, first.Term)
			}
			if e.Leader == nil || e.Leader.Value != "host-b:2" {
				continue
			}
			if e.Term != second.Term || obs.Leader().Term != second.Term {
				t.Fatalf("event %+v, leader %+v", e, obs.Leader())
			}
		case <-time.After(eventWait):
			t.Fatal("no leader event naming b")
		}
		break
	}
	if err := watcher.Unobserve(ctx, "go:elect"); err != nil {
		t.Fatal(err)
	}
	for range obs.Events() { // closed after what came before the unobserve
	}
	wantCode(t, obs.Err(), CodeNotHeld)
	wantCode(t, b.Resign(ctx, "go:elect", first.Token), CodeNotHeld)
	if locks := held(t, b); len(locks) != 1 || locks[0].Resource != "go:elect" {
		t.Fatalf("held %+v", locks)
	}
	if err := b.Resign(ctx, "go:elect", second.Token); err != nil {
		t.Fatal(err)
	}
	if l, err := a.Leader(ctx, "go:elect"); err != nil || l != nil {
		t.Fatalf("leader %+v, %v", l, err)
	}
}
