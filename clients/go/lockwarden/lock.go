// Locks: acquire options, the kinds of hold, and what a granted Lock can do.

package lockwarden

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// AcquireOptions are acquire's optional fields; zero values take the agent's defaults.
type AcquireOptions struct {
	TTL   time.Duration // lock time to live (agent default 30 s); whole milliseconds
	Wait  time.Duration // how long to wait while another holder has it (0: one attempt)
	Renew bool          // the agent extends the lock every TTL/3 while this client is connected
	Fence bool          // also get a fencing token (Lock.Fence)
	// Permits > 0 takes one permit of a semaphore of that many (at most Permits holders at
	// once, each naming the same number); Shared a read hold (readers share, an exclusive hold
	// excludes them). Neither: the exclusive hold, a mutex's or the write hold.
	Permits int
	Shared  bool
	// Detach takes a detached lease: it outlives this connection until its TTL runs out or
	// Client.Release by its token from any connection of this uid. Cannot go with Renew.
	Detach bool
	// Owner says who in the program asks (a request's or job's id, below 2^53); 0: each acquire
	// is an owner of its own, as the client cannot tell goroutines apart. An acquire that could
	// only wait for a hold of the same owner fails with CodeWouldDeadlock. Reentrant (with an
	// Owner): a mutex or write hold this owner holds already is taken again, the same *Lock one
	// more acquire deep (Depth), let go of by as many Releases.
	Owner     int64
	Reentrant bool
}

// Kinds of hold (Lock.Mode).
const (
	ModeExclusive = "exclusive"
	ModeShared    = "shared"
	ModePermit    = "permit"
)

// Acquire takes the lock on resource. Errors: *Error with CodeTimeout (someone else held it for
// all of Wait), CodeNoQuorum (masters unavailable), CodeKindMismatch, CodeBadRequest, ...
// acquireFields are an acquire's fields for o (an owner of its own unless o names one).
func (c *Client) acquireFields(resource string, o AcquireOptions) (map[string]any, error) {
	owner := o.Owner
	if owner == 0 {
		c.mu.Lock()
		c.owners++
		owner = c.owners
		c.mu.Unlock()
	}
	f := map[string]any{"resource": resource, "wait_ms": o.Wait.Milliseconds(), "owner": owner}
	if o.Reentrant {
		f["reentrant"] = true
	}
	if o.TTL > 0 {
		f["ttl_ms"] = o.TTL.Milliseconds()
	}
	if o.Renew {
		f["renew"] = true
	}
	if o.Fence {
		f["fence"] = true
	}
	if o.Permits > 0 {
		f["permits"] = o.Permits
	}
	if o.Shared {
		f["shared"] = true
	}
	if o.Detach {
		f["detach"] = true
	}
	return f, nil
}

func (c *Client) Acquire(ctx context.Context, resource string, o AcquireOptions) (*Lock, error) {
	f, err := c.acquireFields(resource, o)
	if err != nil {
		return nil, err
	}
	r, err := c.request(ctx, "acquire", f)
	if err != nil {
		return nil, err
	}
	return r.lock, nil
}

// Release releases the hold of token on resource: this connection's, or a detached lease from
// any connection (CodeNotHeld: no such hold; CodeForbidden: another uid's lease).
func (c *Client) Release(ctx context.Context, resource, token string) error {
	_, err := c.release(ctx, resource, token)
	return err
}

// release is Release that also says how many acquires a reentrant hold still stands for (0:
// released).
func (c *Client) release(ctx context.Context, resource, token string) (int, error) {
	r, err := c.request(ctx, "release", map[string]any{"resource": resource, "token": token})
	if err != nil {
		return 0, err
	}
	return r.Depth, nil
}

// Extend resets the time to live of the hold of token (as Release) to ttl from now (0: the
// agent's default) and returns the new validity.
func (c *Client) Extend(ctx context.Context, resource, token string, ttl time.Duration) (
	time.Duration, error) {
	f := map[string]any{"resource": resource, "token": token}
	if ttl > 0 {
		f["ttl_ms"] = ttl.Milliseconds()
	}
	r, err := c.request(ctx, "extend", f)
	if err != nil {
		return 0, err
	}
	return time.Duration(r.ValidityMs) * time.Millisecond, nil
}

// Lock is a granted lock.
type Lock struct {
	Resource string
	Token    string
	Validity time.Duration // at grant time; Extend returns the new one, ValidUntil keeps up
	Waited   time.Duration
	Fence    *int64 // only when AcquireOptions.Fence
	Mode     string // ModeExclusive, ModeShared or ModePermit
	Permit   *int   // a semaphore's: which permit (0..Permits-1); nil otherwise
	// Term is a leadership's term (Campaign); 0 for a lock. Resource is then the election name.
	Term int64
	// Detached: a detached lease (AcquireOptions.Detach). No `lost` event comes for it (Lost is
	// closed only if Release finds it gone); it ends at its TTL or when released by its token,
	// from this client or another.
	Detached bool

	c *Client
	// As acquired, for a resume: the ttl asked for (0: the agent's default; an Extend's replaces
	// it), renew (a leadership's always: the agent renews it), the semaphore's size, a read
	// hold; leader: a leadership (resumed by its term).
	ttl     time.Duration
	renew   bool
	permits int
	leader  bool
	owner   int64

	mu         sync.Mutex
	depth      int // acquires of a reentrant hold not yet released (Depth)
	released   bool
	reason     string
	message    string    // the agent's word on the loss, if any
	validSince time.Time // when the request that told validUntil was sent
	validUntil time.Time
	lost       chan struct{}
}

// ReasonAgentLost is the LostReason of a lock that the client could not take over through the
// agent's next run after the connection ended: the agent answered that its masters do not hold
// it any more (or refused it), or its validity ran out first.
const ReasonAgentLost = "agent_lost"

// Lost is closed when the lock ends without being released (the agent pushed `lost`, the
// connection ended and the lock could not be resumed, or Release found it gone): stop the work
// it protected. LostReason says why.
func (l *Lock) Lost() <-chan struct{} { return l.lost }

// LostReason is "" while the lock is held, else renew_failed, expired, revoked, agent_lost
// (ReasonAgentLost), disconnected, or not_held (Release found it gone).
func (l *Lock) LostReason() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reason
}

// Err returns nil while the lock is held, else an *Error with CodeLost.
func (l *Lock) Err() error {
	l.mu.Lock()
	reason, message := l.reason, l.message
	l.mu.Unlock()
	if reason == "" {
		return nil
	}
	if message != "" {
		reason += ": " + message
	}
	return &Error{Code: CodeLost, Message: fmt.Sprintf("lock on %q was lost (%s)", l.Resource,
		reason)}
}

// ValidUntil is the time until which the lock is known to be valid: counted from the sending
// of the request that last told its validity (the grant, an extend, a resume, or for a renewed
// lock the client's own `held` every third of its ttl). While the client reconnects after the
// connection ended, the lock is lost (ReasonAgentLost) once this passes before it is resumed.
func (l *Lock) ValidUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.validUntil
}

// validFrom records a validity told by a request sent at since, unless a later one told it.
func (l *Lock) validFrom(since, until time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !since.Before(l.validSince) {
		l.validSince, l.validUntil = since, until
	}
}

// extended records an extend's answer: ttl is the one to resume with from now on.
func (l *Lock) extended(ttl time.Duration, since, until time.Time) {
	l.ttl = ttl // under the client's mu, as every read of it
	l.validFrom(since, until)
}

// live is true while the lock is neither released nor lost.
func (l *Lock) live() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.released && l.reason == ""
}

// Extend resets the lock's time to live to ttl from now (0: the agent's default) and returns
// the new validity.
func (l *Lock) Extend(ctx context.Context, ttl time.Duration) (time.Duration, error) {
	if err := l.Err(); err != nil {
		return 0, err
	}
	return l.c.Extend(ctx, l.Resource, l.Token, ttl)
}

// Release gives the lock back (a leadership resigns). No-op (nil) if it was already released
// or lost. Answered CodeNotHeld (the lock had ended), it returns that error and the lock is
// lost: reason not_held, unless the agent's `lost` event came first. If ctx ends before the
// answer, Release returns ctx.Err() and the answer still settles the lock when it comes
// (released, or lost with not_held): the request is on its way and cannot be called back.
// While the client reconnects after the agent restarted, it returns nil at once, and the
// client gives the lock back once the agent's next run has resumed it.
func (l *Lock) Release(ctx context.Context) error {
	l.mu.Lock()
	done := l.released || l.reason != ""
	l.mu.Unlock()
	if done || l.releaseResuming() {
		return nil
	}
	settled := make(chan error, 1)
	go func() { settled <- l.settle(l.sendRelease()) }()
	// (A release that leaves a reentrant hold held settles it as still held: sendRelease.)
	select {
	case err := <-settled:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// releaseResuming releases a lock that waits to be resumed after the connection ended: the
// client gives it back to the agent once it has resumed it (resume.go). False if it does not
// wait.
func (l *Lock) releaseResuming() bool {
	l.c.mu.Lock()
	defer l.c.mu.Unlock()
	if l.c.resuming[l.Token] != l {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.depth > 1 { // a reentrant hold: one acquire less, still held
		l.depth--
	} else if l.reason == "" {
		l.released = true
	}
	return true
}

// sendRelease sends the release (resign) and waits for its answer, whatever the caller's ctx.
func (l *Lock) sendRelease() error {
	if l.Term != 0 {
		return l.c.Resign(context.Background(), l.Resource, l.Token)
	}
	left, err := l.c.release(context.Background(), l.Resource, l.Token)
	if err == nil && left > 0 {
		l.mu.Lock()
		l.depth = left
		l.mu.Unlock()
		return errStillHeld
	}
	return err
}

// settle records the answer to a release: released, or lost when it was not_held.
func (l *Lock) settle(err error) error {
	if err == errStillHeld { // a reentrant hold released once: held, one acquire less deep
		return nil
	}
	if err != nil && !IsCode(err, CodeNotHeld) {
		return err
	}
	l.c.mu.Lock()
	delete(l.c.locks, l.Token) // not_held: a lost event still on its way changes nothing now
	if l.c.resuming[l.Token] == l {
		delete(l.c.resuming, l.Token)
	}
	l.c.mu.Unlock()
	if err != nil { // not_held: the lock had ended without this release
		l.markLost(CodeNotHeld, "")
		return err
	}
	l.mu.Lock()
	l.released = true
	l.mu.Unlock()
	return nil
}

// errStillHeld is sendRelease's word that the agent lowered a reentrant hold's depth.
var errStillHeld = errors.New("still held")

// Depth is how many acquires the lock stands for: above 1 for a reentrant hold taken again
// (AcquireOptions.Reentrant), less one for each Release.
func (l *Lock) Depth() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.depth
}

// reentered: a reentrant acquire answered with this lock's grant again.
func (l *Lock) reentered(depth int, sent, validUntil time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.depth = depth
	if validUntil.After(l.validUntil) {
		l.validSince, l.validUntil = sent, validUntil
	}
}

func (l *Lock) markLost(reason, message string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released || l.reason != "" {
		return
	}
	l.reason, l.message = reason, message
	close(l.lost)
}
