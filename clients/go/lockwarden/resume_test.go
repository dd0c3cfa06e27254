// Locks across a restart of the agent (kill -9, then its next run on the same socket): the
// client reconnects and resumes them, or reports them lost. They need the harness.

package lockwarden

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

// heldToken is true once c's connection holds token (false while c reconnects).
func heldToken(c *Client, token string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	raw, err := c.Held(ctx)
	if err != nil {
		return false
	}
	var locks []struct{ Token string }
	if json.Unmarshal(raw, &locks) != nil {
		return false
	}
	for _, l := range locks {
		if l.Token == token {
			return true
		}
	}
	return false
}

// awaitResumed returns once c's new connection holds lock again (resumed through the agent's
// next run), failing the test if it is lost or not resumed in time.
func awaitResumed(t *testing.T, c *Client, lock *Lock) {
	t.Helper()
	for deadline := time.Now().Add(eventWait); !heldToken(c, lock.Token); {
		if err := lock.Err(); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("never resumed")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestARenewedLockIsResumedAfterTheAgentRestarts(t *testing.T) {
	a, _ := clients(t)
	ctx := context.Background()
	lock, err := a.Acquire(ctx, "go:resume", AcquireOptions{TTL: 4 * time.Second, Wait: waitLong,
		Renew: true})
	if err != nil {
		t.Fatal(err)
	}
	control(t, "restart-agent")
	awaitResumed(t, a, lock)
	// Past the ttl: only the new run's renewals keep it.
	time.Sleep(4500 * time.Millisecond)
	if err := lock.Err(); err != nil {
		t.Fatal(err)
	}
	if n := controlInt(t, "count go:resume"); n != 5 {
		t.Fatalf("the resumed lock is on %d masters, not 5", n)
	}
	if !time.Now().Before(lock.ValidUntil()) {
		t.Fatalf("valid until %v, already past", lock.ValidUntil())
	}
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lock.Err(); err != nil {
		t.Fatal(err)
	}
	if n := controlInt(t, "count go:resume"); n != 0 {
		t.Fatalf("released, the lock is still on %d masters", n)
	}
}

func TestALeadershipIsResumedAfterTheAgentRestarts(t *testing.T) {
	a, _ := clients(t) // the other held nothing: it does not reconnect
	ctx := context.Background()
	leadership, err := a.Campaign(ctx, "go:lead", "host-a:1",
		CampaignOptions{TTL: 4 * time.Second, Wait: waitLong})
	if err != nil {
		t.Fatal(err)
	}
	control(t, "restart-agent")
	awaitResumed(t, a, leadership)
	leader, err := a.Leader(ctx, "go:lead")
	if err != nil || leader == nil || leader.Term != leadership.Term {
		t.Fatalf("leader after the resume: %+v, %v (term %d)", leader, err, leadership.Term)
	}
	time.Sleep(4500 * time.Millisecond) // past the ttl: only the new run's renewals keep it
	if err := leadership.Err(); err != nil {
		t.Fatal(err)
	}
	if n := controlInt(t, "count go:lead"); n != 5 {
		t.Fatalf("the resumed leadership is on %d masters, not 5", n)
	}
	if err := leadership.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if leader, err := a.Leader(ctx, "go:lead"); err != nil || leader != nil {
		t.Fatalf("leader after the resign: %+v, %v", leader, err)
	}
}

func TestALockWhoseKeysAreGoneIsReportedLostAfterTheAgentRestarts(t *testing.T) {
	a, _ := clients(t)
	lock, err := a.Acquire(context.Background(), "go:resume-gone", AcquireOptions{
		TTL: 2 * time.Second, Wait: waitLong, Renew: true})
	if err != nil {
		t.Fatal(err)
	}
	control(t, "flush")
	control(t, "restart-agent")
	// The resume answers not_held, unless the old run's renewal found the keys gone first.
	reason := waitLost(t, lock)
	if reason != ReasonAgentLost && reason != "renew_failed" {
		t.Fatalf("reason %q", reason)
	}
	t.Logf("%v", lock.Err())
	wantCode(t, lock.Err(), CodeLost)
}
