// Locks against the live agent: mutexes (fenced, renewed, extended, lost), semaphores, read
// holds, detached leases, and what a connection's end and a cancelled context do to them.

package lockwarden

import (
	"context"
	"encoding/json"
	"regexp"
	"testing"
	"time"
)

func TestAcquireAndRelease(t *testing.T) {
	a, _ := clients(t)
	ctx := context.Background()
	lock, err := a.Acquire(ctx, "go:basic", AcquireOptions{TTL: 10 * time.Second, Wait: waitLong})
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(lock.Token) || lock.Validity < 5*time.Second {
		t.Fatalf("bad grant %+v", lock)
	}
	if h := held(t, a); len(h) != 1 || h[0].Resource != "go:basic" {
		t.Fatalf("held: %+v", h)
	}
	if controlled && controlInt(t, "count go:basic") != 5 {
		t.Fatal("the lock is not on all 5 masters")
	}
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if h := held(t, a); len(h) != 0 {
		t.Fatalf("held after release: %+v", h)
	}
	if controlled && controlInt(t, "count go:basic") != 0 {
		t.Fatal("the lock is still on the masters")
	}
}

func TestHealthSeesEveryMaster(t *testing.T) {
	a, _ := clients(t)
	h, err := a.Health(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Nodes) == 0 || h.Quorum != len(h.Nodes)/2+1 || (controlled && len(h.Nodes) != 5) {
		t.Fatalf("want a majority of the masters (the harness's 5): %+v", h)
	}
	for _, n := range h.Nodes {
		if !n.Up || n.Addr == "" {
			t.Fatalf("node %+v", n)
		}
	}
}

func TestFenceIncreasesFromGrantToGrant(t *testing.T) {
	a, b := clients(t)
	ctx := context.Background()
	o := AcquireOptions{TTL: 10 * time.Second, Wait: waitLong, Fence: true}
	first, err := a.Acquire(ctx, "go:fence", o)
	if err != nil {
		t.Fatal(err)
	}
	if first.Fence == nil || first.Mode != ModeExclusive {
		t.Fatalf("no fence: %+v", first)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	second, err := b.Acquire(ctx, "go:fence", o) // another session: the count is the masters'
	if err != nil {
		t.Fatal(err)
	}
	if second.Fence == nil || *second.Fence <= *first.Fence {
		t.Fatalf("fence %v after %d", second.Fence, *first.Fence)
	}
	plain, err := a.Acquire(ctx, "go:fence-plain", AcquireOptions{TTL: 10 * time.Second,
		Wait: waitLong})
	if err != nil || plain.Fence != nil {
		t.Fatalf("unasked-for fence: %+v, %v", plain, err)
	}
	_, err = a.Acquire(ctx, "go:fence-read", AcquireOptions{Shared: true, Fence: true})
	wantCode(t, err, CodeBadRequest)
}

func TestTimeoutWhenAnotherConnectionHoldsIt(t *testing.T) {
	a, b := clients(t)
	ctx := context.Background()
	if _, err := a.Acquire(ctx, "go:busy", AcquireOptions{TTL: 10 * time.Second, Wait: waitLong}); err != nil {
		t.Fatal(err)
	}
	_, err := b.Acquire(ctx, "go:busy", AcquireOptions{TTL: time.Second, Wait: 200 * time.Millisecond})
	wantCode(t, err, CodeTimeout)
}

func TestSemaphoreAdmitsKHoldersAndRefusesAnotherSize(t *testing.T) {
	a, b := clients(t)
	ctx := context.Background()
	o := AcquireOptions{TTL: 10 * time.Second, Wait: waitLong, Permits: 2}
	first, err := a.Acquire(ctx, "go:pool", o)
	if err != nil {
		t.Fatal(err)
	}
	second, err := b.Acquire(ctx, "go:pool", o)
	if err != nil {
		t.Fatal(err)
	}
	if first.Mode != ModePermit || second.Mode != ModePermit || first.Permit == nil ||
		second.Permit == nil || *first.Permit+*second.Permit != 1 {
		t.Fatalf("want permits 0 and 1: %+v %+v", first, second)
	}
	c := third(t)
	_, err = c.Acquire(ctx, "go:pool", AcquireOptions{TTL: 10 * time.Second, Permits: 2})
	wantCode(t, err, CodeTimeout)
	_, err = c.Acquire(ctx, "go:pool", AcquireOptions{TTL: 10 * time.Second, Permits: 3})
	wantCode(t, err, CodeKindMismatch)
}

func TestSharedHoldsShareAndKeepTheExclusiveHoldOut(t *testing.T) {
	a, b := clients(t)
	ctx := context.Background()
	o := AcquireOptions{TTL: 10 * time.Second, Wait: waitLong, Shared: true}
	r1, err := a.Acquire(ctx, "go:cfg", o)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := b.Acquire(ctx, "go:cfg", o)
	if err != nil {
		t.Fatal(err)
	}
	if r1.Mode != ModeShared || r2.Mode != ModeShared || r1.Permit != nil {
		t.Fatalf("want two shared holds: %+v %+v", r1, r2)
	}
	_, err = third(t).Acquire(ctx, "go:cfg", AcquireOptions{TTL: 10 * time.Second})
	wantCode(t, err, CodeTimeout)
	_, err = a.Acquire(ctx, "go:other", AcquireOptions{Permits: 2, Shared: true})
	wantCode(t, err, CodeBadRequest)
}

func TestWaiterGetsTheLockWhenTheHolderReleases(t *testing.T) {
	a, b := clients(t)
	ctx := context.Background()
	holder, err := a.Acquire(ctx, "go:queue", AcquireOptions{TTL: 10 * time.Second, Wait: waitLong})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		lock *Lock
		err  error
	}
	got := make(chan result, 1)
	go func() {
		l, err := b.Acquire(ctx, "go:queue", AcquireOptions{TTL: 10 * time.Second, Wait: 30 * time.Second})
		got <- result{l, err}
	}()
	// The agent lists queued requests: release only once b is really waiting. Every lock of the
	// agent is listed (a lock of an earlier test may still be being released): look at ours.
	for deadline := time.Now().Add(eventWait); ; time.Sleep(10 * time.Millisecond) {
		raw, err := a.Request(ctx, "locks", nil)
		if err != nil {
			t.Fatal(err)
		}
		var r struct{ Locks []heldLock }
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatal(err)
		}
		queued := false
		for _, l := range r.Locks {
			queued = queued || (l.Resource == "go:queue" && l.Waiters == 1)
		}
		if queued {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("b never queued")
		}
	}
	// b queued before now: held holdFor longer, it has waited at least that long when granted.
	time.Sleep(holdFor)
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var r result
	select {
	case r = <-got:
	case <-time.After(eventWait):
		t.Fatal("b was never answered")
	}
	if r.err != nil || r.lock.Waited < holdFor {
		t.Fatalf("waiter: %+v %v", r.lock, r.err)
	}
}

func TestRenewKeepsTheLockPastItsTTL(t *testing.T) {
	a, b := clients(t)
	ctx := context.Background()
	// A ttl long enough that a renewal every ttl/3 on a loaded machine is never late; the sleep
	// is the point of the test: 3 ttls pass, and only renewals keep the lock.
	lock, err := a.Acquire(ctx, "go:renew", AcquireOptions{TTL: 2 * time.Second, Wait: waitLong, Renew: true})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(6 * time.Second)
	if err := lock.Err(); err != nil {
		t.Fatal(err)
	}
	if h := held(t, a); len(h) != 1 || !h[0].Renew {
		t.Fatalf("held: %+v", h)
	}
	_, err = b.Acquire(ctx, "go:renew", AcquireOptions{TTL: time.Second, Wait: 200 * time.Millisecond})
	wantCode(t, err, CodeTimeout)
}

func TestExplicitExtend(t *testing.T) {
	a, _ := clients(t)
	ctx := context.Background()
	// 5 s: enough to still hold it when the extend arrives; 20 s after: over 10 s is the new ttl.
	lock, err := a.Acquire(ctx, "go:extend", AcquireOptions{TTL: 5 * time.Second, Wait: waitLong})
	if err != nil {
		t.Fatal(err)
	}
	validity, err := lock.Extend(ctx, 20*time.Second)
	if err != nil || validity < 10*time.Second {
		t.Fatalf("extend: %v %v", validity, err)
	}
	if h := held(t, a); len(h) != 1 || h[0].ValidityMs < 10000 {
		t.Fatalf("held: %+v", h)
	}
	if controlled && controlInt(t, "pttl go:extend") < 10000 {
		t.Fatal("the masters did not get the new ttl")
	}
}

func TestLockWithoutRenewExpiresAndIsReportedLost(t *testing.T) {
	a, _ := clients(t)
	ctx := context.Background()
	lock, err := a.Acquire(ctx, "go:expire", AcquireOptions{TTL: time.Second, Wait: waitLong})
	if err != nil {
		t.Fatal(err)
	}
	if reason := waitLost(t, lock); reason != "expired" {
		t.Fatalf("reason %q", reason)
	}
	_, err = lock.Extend(ctx, time.Second)
	wantCode(t, err, CodeLost)
}

func TestLostWhenRenewalFails(t *testing.T) {
	a, _ := clients(t)
	ctx := context.Background()
	lock, err := a.Acquire(ctx, "go:lost", AcquireOptions{TTL: 2 * time.Second, Wait: waitLong, Renew: true})
	if err != nil {
		t.Fatal(err)
	}
	control(t, "flush") // the keys vanish: the next renewal finds the lock gone
	if reason := waitLost(t, lock); reason != "renew_failed" {
		t.Fatalf("reason %q", reason)
	}
	if h := held(t, a); len(h) != 0 {
		t.Fatalf("held: %+v", h)
	}
}

func TestNoQuorumWhenAMajorityOfMastersIsDown(t *testing.T) {
	a, _ := clients(t)
	ctx := context.Background()
	control(t, "kill-majority")
	_, err := a.Acquire(ctx, "go:quorum", AcquireOptions{TTL: time.Second, Wait: 100 * time.Millisecond})
	control(t, "restore")
	wantCode(t, err, CodeNoQuorum)
	lock, err := a.Acquire(ctx, "go:quorum", AcquireOptions{TTL: time.Second, Wait: waitLong})
	if err != nil {
		t.Fatal(err)
	}
	lock.Release(ctx)
}

func TestClosingTheConnectionReleasesItsLocks(t *testing.T) {
	a, b := clients(t)
	ctx := context.Background()
	lock, err := a.Acquire(ctx, "go:close", AcquireOptions{TTL: 10 * time.Second, Wait: waitLong})
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	if reason := waitLost(t, lock); reason != CodeDisconnected {
		t.Fatalf("reason %q", reason)
	}
	// Released once the agent has seen the connection end: well before b's wait runs out.
	if _, err := b.Acquire(ctx, "go:close", AcquireOptions{TTL: time.Second, Wait: waitLong}); err != nil {
		t.Fatal(err)
	}
	wantCode(t, a.Ping(ctx), CodeDisconnected)
}

func TestCancelledAcquireGivesTheLateGrantBack(t *testing.T) {
	a, b := clients(t)
	holder, err := a.Acquire(context.Background(), "go:cancel", AcquireOptions{TTL: 10 * time.Second, Wait: waitLong})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = b.Acquire(ctx, "go:cancel", AcquireOptions{TTL: 10 * time.Second, Wait: 5 * time.Second})
	if err != context.DeadlineExceeded {
		t.Fatalf("want DeadlineExceeded, got %v", err)
	}
	holder.Release(context.Background()) // b's abandoned request gets the lock, and gives it back
	l, err := a.Acquire(context.Background(), "go:cancel", AcquireOptions{TTL: time.Second, Wait: waitLong})
	if err != nil {
		t.Fatal(err)
	}
	l.Release(context.Background())
}

func TestDetachedLeaseOutlivesItsConnection(t *testing.T) {
	a, b := clients(t)
	ctx := context.Background()
	lease, err := a.Acquire(ctx, "go:lease", AcquireOptions{TTL: time.Minute, Wait: waitLong,
		Detach: true})
	if err != nil {
		t.Fatal(err)
	}
	if !lease.Detached {
		t.Fatal("not detached")
	}
	a.Close()
	if lease.LostReason() != "" {
		t.Fatalf("lost: %s", lease.LostReason())
	}
	_, err = b.Acquire(ctx, "go:lease", AcquireOptions{TTL: time.Second})
	wantCode(t, err, CodeTimeout)
	if v, err := b.Extend(ctx, "go:lease", lease.Token, 30*time.Second); err != nil ||
		v <= 15*time.Second {
		t.Fatalf("extend %v, %v", v, err)
	}
	if err := b.Release(ctx, "go:lease", lease.Token); err != nil {
		t.Fatal(err)
	}
	wantCode(t, b.Release(ctx, "go:lease", lease.Token), CodeNotHeld)
	lock, err := b.Acquire(ctx, "go:lease", AcquireOptions{TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	lock.Release(ctx)
}

func TestAnOwnerAskingAgainIsWouldDeadlockOrReentrantOthersWait(t *testing.T) {
	a, _ := clients(t)
	ctx := context.Background()
	o := AcquireOptions{TTL: 10 * time.Second, Wait: waitLong, Owner: 7}
	lock, err := a.Acquire(ctx, "go:again", o)
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Acquire(ctx, "go:again", AcquireOptions{TTL: 10 * time.Second, Wait: 30 * time.Second, Owner: 7})
	wantCode(t, err, CodeWouldDeadlock)
	o.Reentrant = true
	inner, err := a.Acquire(ctx, "go:again", o)
	if err != nil {
		t.Fatal(err)
	}
	if inner != lock || lock.Depth() != 2 {
		t.Fatalf("want the same lock 2 deep, got %p (depth %d) for %p", inner, lock.Depth(), lock)
	}
	if err := inner.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if lock.Depth() != 1 {
		t.Fatalf("depth %d after one release", lock.Depth())
	}
	select {
	case <-lock.Lost():
		t.Fatal("one release of two ended the lock")
	default:
	}
	// Without an Owner, each acquire is its own: it waits for the hold like another goroutine.
	got := make(chan error, 1)
	go func() {
		other, err := a.Acquire(ctx, "go:again", AcquireOptions{TTL: 10 * time.Second, Wait: 30 * time.Second})
		if err == nil {
			err = other.Release(ctx)
		}
		got <- err
	}()
	waitQueued(t, a, "go:again")
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(eventWait):
		t.Fatal("the other acquire was never granted")
	}
}

func TestSeveralResourcesAreTakenAllOrNoneAndHeldTogether(t *testing.T) {
	a, b := clients(t)
	ctx := context.Background()
	set, err := a.AcquireAll(ctx, []string{"go:set-b", "go:set-a"}, AcquireOptions{TTL: 2 * time.Second, Wait: waitLong})
	if err != nil {
		t.Fatal(err)
	}
	// Lost together: go:set-a expires (not renewed) while go:set-b, extended far past it, is
	// held; the set then lets go of go:set-b.
	if _, err := set.Lock("go:set-b").Extend(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if len(set.Locks) != 2 || set.Locks[0].Resource != "go:set-a" || set.Locks[1].Resource != "go:set-b" ||
		set.Locks[0].Token == set.Locks[1].Token {
		t.Fatalf("want a lock each in canonical order: %+v", set.Locks)
	}
	_, err = b.AcquireAll(ctx, []string{"go:set-c", "go:set-b"}, AcquireOptions{TTL: 10 * time.Second, Wait: 200 * time.Millisecond})
	wantCode(t, err, CodeTimeout)
	if h := held(t, b); len(h) != 0 {
		t.Fatalf("all or none: %+v", h)
	}
	select {
	case <-set.Lost():
	case <-time.After(eventWait):
		t.Fatal("the set was never lost")
	}
	if set.LostReason() != "expired" {
		t.Fatalf("lost: %q", set.LostReason())
	}
	deadline := time.Now().Add(eventWait)
	for len(held(t, a)) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the set's other lock is still held")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
