// Several resources at once: AcquireAll and the LockSet it returns.

package lockwarden

import (
	"context"
	"sync"
	"time"
)

// LockSet is several locks taken at once (Client.AcquireAll) and held together: Locks in their
// canonical order (sorted), one per resource, each with its own token and fence. When one of them
// is lost the set is lost: Lost is closed, LostReason says why, and the others are released.
type LockSet struct {
	Locks []*Lock

	once     sync.Once
	lost     chan struct{}
	reason   string
	doneOnce sync.Once
	done     chan struct{} // closed by Release: the watches end
}

// AcquireAll takes every one of resources (2 to 16, distinct), all or none, within o.Wait: the
// agent takes them in one canonical order, so two such acquires never wait for each other in a
// cycle. Options as Acquire's, each applied to every resource (not Detach, Reentrant). Errors as
// Acquire's, the message naming the resource that could not be taken (none is held then).
func (c *Client) AcquireAll(ctx context.Context, resources []string, o AcquireOptions) (*LockSet, error) {
	if o.Detach || o.Reentrant {
		return nil, &Error{Code: CodeBadRequest, Message: "AcquireAll takes neither Detach nor Reentrant"}
	}
	f, err := c.acquireFields("", o)
	if err != nil {
		return nil, err
	}
	delete(f, "resource")
	f["resources"] = resources
	r, err := c.request(ctx, "acquire", f)
	if err != nil {
		return nil, err
	}
	s := &LockSet{Locks: r.locks, lost: make(chan struct{}), done: make(chan struct{})}
	for _, lock := range s.Locks {
		go s.watch(lock)
	}
	return s, nil
}

// Lock is the lock of resource in the set, or nil.
func (s *LockSet) Lock(resource string) *Lock {
	for _, l := range s.Locks {
		if l.Resource == resource {
			return l
		}
	}
	return nil
}

// Lost is closed when one of the set's locks is lost; the others are released then.
func (s *LockSet) Lost() <-chan struct{} { return s.lost }

// LostReason is why the first lock of the set was lost ("" while all are held).
func (s *LockSet) LostReason() string {
	select {
	case <-s.lost:
		return s.reason
	default:
		return ""
	}
}

// Release releases every lock of the set, and returns the first error after trying them all.
func (s *LockSet) Release(ctx context.Context) error {
	s.doneOnce.Do(func() { close(s.done) })
	var first error
	for _, l := range s.Locks {
		if err := l.Release(ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// watch ends the set when lock is lost, until the set is released.
func (s *LockSet) watch(lock *Lock) {
	select {
	case <-lock.Lost():
	case <-s.done:
		return
	}
	s.once.Do(func() {
		s.reason = lock.LostReason()
		close(s.lost)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, other := range s.Locks {
			other.Release(ctx) // lost too, or the connection ended: nothing is held either way
		}
	})
}

// grantedAll registers the locks of an acquire of several resources (the reader, c.mu held);
// true when the caller gave up and they are given back.
func (c *Client) grantedAll(l *link, p *pending, r *reply) bool {
	renew := false
	for i := range r.Resources {
		e := &r.Resources[i]
		lock := &Lock{c: c, Resource: e.Resource, Token: e.Token,
			Validity: time.Duration(e.ValidityMs) * time.Millisecond,
			Waited:   time.Duration(e.WaitedMs) * time.Millisecond, Fence: e.Fence,
			Mode: e.Mode, Permit: e.Permit, lost: make(chan struct{}),
			ttl: fieldMs(p.fields, "ttl_ms"), renew: p.fields["renew"] == true,
			validSince: p.sent, validUntil: p.sent.Add(time.Duration(e.ValidityMs) * time.Millisecond),
			depth: 1}
		lock.owner, _ = p.fields["owner"].(int64)
		if permits, ok := p.fields["permits"].(int); ok {
			lock.permits = permits
		}
		if lock.Mode == "" {
			lock.Mode = ModeExclusive
		}
		c.locks[lock.Token] = lock
		r.locks = append(r.locks, lock)
		renew = renew || lock.renew
	}
	if p.abandoned { // the caller gave up: nobody else will release them
		for _, lock := range r.locks {
			go lock.Release(context.Background())
		}
		return true
	}
	if renew {
		l.poke()
	}
	return false
}
