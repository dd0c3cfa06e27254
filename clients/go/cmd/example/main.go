// Command example takes a lock through the lockwarden agent at $LOCKWARDEN_SOCKET, works under
// it, and shows how to tell the error codes apart:
//
//	go run ./cmd/example [resource]
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"lockwarden/clients/go/lockwarden"
)

func main() {
	resource := "example:go"
	if len(os.Args) > 1 {
		resource = os.Args[1]
	}
	os.Exit(run(resource))
}

func run(resource string) int {
	client, err := lockwarden.Dial("") // $LOCKWARDEN_SOCKET or /run/lockwarden/lockwarden.sock
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent unreachable:", err)
		return 69
	}
	defer client.Close() // closing the connection would release the lock too
	ctx := context.Background()

	// Wait up to 5 s for another holder; the agent renews the lock while we stay connected.
	lock, err := client.Acquire(ctx, resource, lockwarden.AcquireOptions{
		TTL: 3 * time.Second, Wait: 5 * time.Second, Renew: true})
	switch {
	case lockwarden.IsCode(err, lockwarden.CodeTimeout):
		fmt.Println("busy: someone else held", resource, "for all 5 s; try later")
		return 75
	case lockwarden.IsCode(err, lockwarden.CodeNoQuorum):
		fmt.Fprintln(os.Stderr, "lock service unavailable (no quorum of masters):", err)
		return 69
	case err != nil:
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("acquired %s (valid %v, waited %v)\n", resource, lock.Validity, lock.Waited)

	// Work in steps, stopping at once if the lock is lost.
	for step := 1; step <= 3; step++ {
		select {
		case <-lock.Lost():
			fmt.Fprintln(os.Stderr, "lock lost:", lock.LostReason(), "- stopping the work")
			return 72
		case <-time.After(time.Second): // one step of real work
			fmt.Println("step", step, "done")
		}
	}

	// An explicit extension, for code that does not use renew.
	if validity, err := lock.Extend(ctx, 10*time.Second); err != nil {
		fmt.Fprintln(os.Stderr, "extend failed:", err) // not_held: lost; no_quorum: outage
	} else {
		fmt.Println("extended, valid", validity)
	}

	if err := lock.Release(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "release failed (the lock expires with its ttl):", err)
		return 1
	}
	fmt.Println("released", resource)
	return 0
}
