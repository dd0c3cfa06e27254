// Examples for the documentation. They need a running agent, so they have no Output comment:
// `go test` and `go vet` compile them without running them.

package lockwarden_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"lockwarden/clients/go/lockwarden"
)

// Take a lock, renewed by the agent while the work runs, and stop the work if it is lost.
func Example() {
	ctx := context.Background()
	c, err := lockwarden.Dial("") // $LOCKWARDEN_SOCKET, else /run/lockwarden/lockwarden.sock
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close() // the agent releases whatever this connection still holds

	lock, err := c.Acquire(ctx, "db/migrations", lockwarden.AcquireOptions{
		TTL: 30 * time.Second, Wait: 5 * time.Second, Renew: true})
	if lockwarden.IsCode(err, lockwarden.CodeTimeout) {
		fmt.Println("someone else is migrating; try later")
		return
	} else if err != nil {
		log.Fatal(err)
	}
	defer lock.Release(ctx)
	for _, step := range []string{"schema", "data"} {
		select {
		case <-lock.Lost():
			log.Fatalf("lock lost (%s): stopping before %s", lock.LostReason(), step)
		default:
		}
		fmt.Println("migrating", step)
	}
}

// An acquire's wait ends with ctx as well as with Wait; a lock granted after ctx ended is given
// back by the client.
func ExampleClient_Acquire() {
	c, err := lockwarden.Dial("")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	lock, err := c.Acquire(ctx, "reports/daily", lockwarden.AcquireOptions{
		TTL: 10 * time.Second, Wait: time.Minute})
	switch {
	case errors.Is(err, context.DeadlineExceeded), lockwarden.IsCode(err, lockwarden.CodeTimeout):
		fmt.Println("busy")
		return
	case lockwarden.IsCode(err, lockwarden.CodeNoQuorum):
		fmt.Println("lock service unavailable: retry with backoff")
		return
	case err != nil:
		log.Fatal(err)
	}
	defer lock.Release(context.Background())
	fmt.Println("holding", lock.Resource, "for", lock.Validity, "after waiting", lock.Waited)
}

// A fencing token: hand it to the storage the lock protects, which refuses a write with a lower
// fence than the highest it has seen.
func ExampleClient_Acquire_fence() {
	ctx := context.Background()
	c, err := lockwarden.Dial("")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	lock, err := c.Acquire(ctx, "ledger", lockwarden.AcquireOptions{
		Wait: 5 * time.Second, Renew: true, Fence: true})
	if err != nil {
		log.Fatal(err)
	}
	defer lock.Release(ctx)
	fmt.Printf("UPDATE ledger SET ..., fence = %d WHERE fence < %d\n", *lock.Fence, *lock.Fence)
}

// A semaphore: at most 4 holders of "payment-api" at once, each naming the same 4.
func ExampleClient_Acquire_semaphore() {
	ctx := context.Background()
	c, err := lockwarden.Dial("")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	permit, err := c.Acquire(ctx, "payment-api", lockwarden.AcquireOptions{
		Permits: 4, Wait: 10 * time.Second, Renew: true})
	if err != nil {
		log.Fatal(err) // CodeKindMismatch: someone uses it with another number of permits
	}
	defer permit.Release(ctx)
	fmt.Println("calling with permit", *permit.Permit, "of 4")
}

// A read-write lock: readers take shared holds together; a writer's exclusive hold (the plain
// Acquire) waits for them and keeps new readers out.
func ExampleClient_Acquire_shared() {
	ctx := context.Background()
	c, err := lockwarden.Dial("")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	read, err := c.Acquire(ctx, "config", lockwarden.AcquireOptions{
		Shared: true, Wait: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("reading config under a", read.Mode, "hold")
	read.Release(ctx)

	write, err := c.Acquire(ctx, "config", lockwarden.AcquireOptions{Wait: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("writing config under the", write.Mode, "hold")
	write.Release(ctx)
}

// A detached lease outlives the connection that took it: a job takes it and exits, a later job
// (any connection of the same uid) extends or releases it by its token.
func ExampleClient_Acquire_detach() {
	ctx := context.Background()
	c, err := lockwarden.Dial("")
	if err != nil {
		log.Fatal(err)
	}
	lease, err := c.Acquire(ctx, "backup/nightly", lockwarden.AcquireOptions{
		TTL: time.Hour, Wait: 10 * time.Second, Detach: true})
	if err != nil {
		log.Fatal(err)
	}
	c.Close() // the lease stays
	fmt.Println("lease token:", lease.Token)

	later, err := lockwarden.Dial("")
	if err != nil {
		log.Fatal(err)
	}
	defer later.Close()
	if _, err := later.Extend(ctx, "backup/nightly", lease.Token, time.Hour); err != nil {
		log.Fatal(err) // CodeNotHeld: it ran out or was released
	}
	if err := later.Release(ctx, "backup/nightly", lease.Token); err != nil {
		log.Fatal(err)
	}
}

// Renewing by hand instead of with Renew: extend before the validity runs out.
func ExampleLock_Extend() {
	ctx := context.Background()
	c, err := lockwarden.Dial("")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	lock, err := c.Acquire(ctx, "reindex", lockwarden.AcquireOptions{TTL: 20 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer lock.Release(ctx)
	for batch := 0; batch < 3; batch++ {
		fmt.Println("batch", batch) // each well within the validity
		validity, err := lock.Extend(ctx, 20*time.Second)
		if err != nil {
			log.Fatal(err) // CodeNotHeld: lost, stop; CodeNoQuorum: an outage
		}
		fmt.Println("valid for", validity)
	}
}

// Lead an election while the process serves; resign when done.
func ExampleClient_Campaign() {
	ctx := context.Background()
	c, err := lockwarden.Dial("")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close() // also resigns
	lead, err := c.Campaign(ctx, "scheduler", "host-a:8080", lockwarden.CampaignOptions{
		TTL: 10 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("leading scheduler in term", lead.Term)
	select {
	case <-lead.Lost():
		fmt.Println("no longer the leader:", lead.LostReason())
	case <-time.After(time.Minute): // the work of a leader
		lead.Release(ctx) // resigns
	}
}

// Follow who leads an election, from any client.
func ExampleClient_Observe() {
	ctx := context.Background()
	c, err := lockwarden.Dial("")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if l, err := c.Leader(ctx, "scheduler"); err == nil && l != nil {
		fmt.Println("now:", l.Value, "term", l.Term)
	}
	obs, err := c.Observe(ctx, "scheduler")
	if err != nil {
		log.Fatal(err)
	}
	for e := range obs.Events() { // until Unobserve or the connection's end
		switch {
		case e.Leader == nil:
			fmt.Println("nobody leads; the leader of term", e.Term, "is gone")
		default:
			fmt.Println("leader:", e.Leader.Value, "term", e.Term)
		}
		if e.Missed {
			fmt.Println("(earlier changes may have gone unseen)")
		}
		if e.Term >= 100 {
			c.Unobserve(ctx, "scheduler")
		}
	}
	fmt.Println("ended:", obs.Err())
}

// Telling the errors apart by the agent's code.
func ExampleIsCode() {
	c, err := lockwarden.Dial("")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	_, err = c.Acquire(context.Background(), "payment-api", lockwarden.AcquireOptions{Permits: 8})
	var e *lockwarden.Error
	switch {
	case lockwarden.IsCode(err, lockwarden.CodeKindMismatch):
		fmt.Println("in use as another kind or size")
	case errors.As(err, &e):
		fmt.Println(e.Code, e.Message)
	}
}
