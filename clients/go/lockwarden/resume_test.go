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

func TestARenewedLockIsResumedAfterTheAgentRestarts(t *testing.T) {
	a, _ := clients(t)
	ctx := context.Background()
	lock, err := a.Acquire(ctx, "go:resume", AcquireOptions{TTL: 4 * time.Second, Wait: waitLong,
		Renew: true})
	if err != nil {
		t.Fatal(err)
	}
	control(t, "restart-agent")
	for deadline := time.Now().Add(eventWait); !heldToken(a, lock.Token); {
		if err := lock.Err(); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the lock was never resumed")
		}
		time.Sleep(20 * time.Millisecond)
	}
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
