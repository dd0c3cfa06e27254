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

func TestLeadershipIsLostWhenItsRenewalFails(t *testing.T) {
	a, b := clients(t)
	ctx := context.Background()
	lead, err := a.Campaign(ctx, "go:elect-lost", "host-a:1", CampaignOptions{TTL: 2 * time.Second,
		Wait: waitLong})
	if err != nil {
		t.Fatal(err)
	}
	control(t, "flush") // the record and the hold vanish: the next renewal finds them gone
	if reason := waitLost(t, lead); reason != "renew_failed" {
		t.Fatalf("reason %q", reason)
	}
	wantCode(t, lead.Err(), CodeLost)
	if l, err := b.Leader(ctx, "go:elect-lost"); err != nil || l != nil {
		t.Fatalf("leader %+v, %v", l, err)
	}
	if err := lead.Release(ctx); err != nil { // nothing left to resign
		t.Fatal(err)
	}
	again, err := b.Campaign(ctx, "go:elect-lost", "host-b:2", CampaignOptions{Wait: waitLong})
	if err != nil || again.Term <= 0 {
		t.Fatalf("campaign after the loss: %+v, %v", again, err)
	}
}

// nextEvent waits (eventWait at most) for the observation's next event.
func nextEvent(t *testing.T, o *Observation) LeaderEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), eventWait)
	defer cancel()
	e, err := o.Next(ctx)
	if err != nil {
		t.Fatalf("no event on %s: %v", o.Name, err)
	}
	return e
}

func TestObserverHearsALeaderComeAndGo(t *testing.T) {
	watcher, b := clients(t)
	ctx := context.Background()
	obs, err := watcher.Observe(ctx, "go:watch")
	if err != nil || obs.Initial != nil || obs.Leader() != nil {
		t.Fatalf("observe of a name nobody leads: %+v, %v", obs, err)
	}
	lead, err := b.Campaign(ctx, "go:watch", "host-b:2", CampaignOptions{TTL: 10 * time.Second,
		Wait: waitLong})
	if err != nil {
		t.Fatal(err)
	}
	e := nextEvent(t, obs)
	if e.Name != "go:watch" || e.Leader == nil || e.Leader.Value != "host-b:2" ||
		e.Term != lead.Term || e.Leader.Term != lead.Term {
		t.Fatalf("event %+v, leader %+v, term %d", e, e.Leader, lead.Term)
	}
	if err := lead.Release(ctx); err != nil { // resigns
		t.Fatal(err)
	}
	if e := nextEvent(t, obs); e.Leader != nil || e.Term != lead.Term || obs.Leader() != nil {
		t.Fatalf("after the resign: %+v, leader %+v", e, obs.Leader())
	}

	// Observing again starts over: the first observation ends, the second has the state now.
	again, err := watcher.Observe(ctx, "go:watch")
	if err != nil || again.Initial != nil {
		t.Fatalf("observe again: %+v, %v", again, err)
	}
	_, err = obs.Next(ctx)
	wantCode(t, err, CodeNotHeld)
	// The connection's end ends it too.
	watcher.Close()
	_, err = again.Next(ctx)
	wantCode(t, err, CodeDisconnected)
	wantCode(t, watcher.Unobserve(ctx, "go:watch"), CodeDisconnected)
}
