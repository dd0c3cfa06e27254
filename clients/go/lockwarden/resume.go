// Locks across a restart of the agent: the client reads the validity of its renewed locks while
// connected, and when the connection ends of itself, reconnects to the same socket and resumes
// its locks through the agent's next run (docs/protocol.md#resume).

package lockwarden

import (
	"context"
	"encoding/json"
	"net"
	"sync"
	"time"
)

const (
	resumeBackoff    = 50 * time.Millisecond  // the first wait between two reconnections
	resumeBackoffMax = 500 * time.Millisecond // doubling up to this
	heldEveryMin     = 100 * time.Millisecond // the held poller asks at most this often
	resumesInFlight  = 32                     // resumes sent at once on a new connection
)

// heldEvery is how often the held poller reads the validity of the renewed locks: a third of
// the smallest ttl among them (at most every heldEveryMin), or 0 when none is held (c.mu held).
func (c *Client) heldEvery() time.Duration {
	var least time.Duration
	for _, lock := range c.locks {
		if !lock.renew {
			continue
		}
		ttl := lock.ttl
		if ttl <= 0 { // the agent's default: the grant's validity is a little less
			ttl = lock.Validity
		}
		if least == 0 || ttl < least {
			least = ttl
		}
	}
	if least == 0 {
		return 0
	}
	if least/3 < heldEveryMin {
		return heldEveryMin
	}
	return least / 3
}

// pollHeld runs while l is the client's connection: every heldEvery it sends `held` and sets
// each lock's validity to the one listed, counted from when the request was sent. The agent
// renews those locks; this is how the client knows until when, should the agent die.
func (c *Client) pollHeld(l *link) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	last := time.Now()
	for {
		c.mu.Lock()
		every := c.heldEvery()
		c.mu.Unlock()
		if every == 0 {
			select {
			case <-l.done:
				return
			case <-l.wake:
				last = time.Now() // the grant told its validity
				continue
			}
		}
		if wait := time.Until(last.Add(every)); wait > 0 {
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
			timer.Reset(wait)
			select {
			case <-l.done:
				return
			case <-l.wake: // a lock with a shorter ttl, maybe
			case <-timer.C:
			}
			continue
		}
		last = time.Now()
		timeout := every
		if timeout < 5*time.Second {
			timeout = 5 * time.Second
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		r, err := c.send(ctx, l, "held", nil, nil)
		cancel()
		if err != nil {
			continue // the connection ended (done says so), or a slow answer: ask again
		}
		var entries []struct {
			Token      string `json:"token"`
			ValidityMs int64  `json:"validity_ms"`
		}
		if json.Unmarshal(r.Locks, &entries) != nil {
			continue
		}
		c.mu.Lock()
		for _, e := range entries {
			if lock := c.locks[e.Token]; lock != nil {
				lock.validFrom(last, last.Add(time.Duration(e.ValidityMs)*time.Millisecond))
			}
		}
		c.mu.Unlock()
	}
}

// resume runs while locks wait in c.resuming to be taken over through the agent's next run: it
// connects again (backing off from resumeBackoff to resumeBackoffMax) and resumes each on the new
// connection, until each is held again or lost (ReasonAgentLost: refused, or its validity ran
// out first) or the client is closed. done is closed when it ends.
func (c *Client) resume(done chan struct{}) {
	defer close(done)
	backoff := resumeBackoff
	for {
		now := time.Now()
		c.mu.Lock()
		var todo, expired []*Lock
		var earliest time.Time
		for token, lock := range c.resuming {
			// A lock released meanwhile is resumed too, to be given back (dispatch).
			switch until := lock.ValidUntil(); {
			case lock.LostReason() != "":
				delete(c.resuming, token)
			case !now.Before(until):
				delete(c.resuming, token)
				expired = append(expired, lock) // lost, unless released
			default:
				todo = append(todo, lock)
				if earliest.IsZero() || until.Before(earliest) {
					earliest = until
				}
			}
		}
		l, why := c.cur, c.down
		if c.shut || len(todo) == 0 {
			c.resumer = nil
			todo = nil
		}
		c.mu.Unlock()
		for _, lock := range expired {
			lock.markLost(ReasonAgentLost, "its validity ran out before the agent was back ("+
				errorText(why)+")")
		}
		if todo == nil {
			return
		}
		if l == nil {
			l = c.reconnect(earliest)
		}
		if l != nil && c.resumeOn(l, todo) {
			continue // all settled: the next round finds c.resuming empty
		}
		wait := backoff
		if left := time.Until(earliest); left < wait {
			wait = left
		}
		backoff *= 2
		if backoff > resumeBackoffMax {
			backoff = resumeBackoffMax
		}
		timer := time.NewTimer(wait)
		select {
		case <-c.closing:
		case <-timer.C:
		}
		timer.Stop()
	}
}

func errorText(err error) string {
	if err == nil {
		return "connection to the agent closed"
	}
	return err.Error()
}

// reconnect connects to the agent's socket again and makes it the client's connection; nil if
// the agent is not there (yet) or the client was closed.
func (c *Client) reconnect(deadline time.Time) *link {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-c.closing:
			cancel()
		case <-stop:
		}
	}()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.path)
	if err != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.shut {
		conn.Close()
		return nil
	}
	return c.install(conn)
}

// resumeOn sends a resume for each lock on l (each waiting at most until its validity ends) and
// settles it by the answer: held again (dispatch moved it to c.locks), lost (ReasonAgentLost:
// refused, or its validity ran out), or still to resume (an outage, retry). It reports whether
// none is left to retry.
func (c *Client) resumeOn(l *link, locks []*Lock) bool {
	var wg sync.WaitGroup
	var mu sync.Mutex
	settled := true
	slots := make(chan struct{}, resumesInFlight)
	for _, lock := range locks {
		wg.Add(1)
		slots <- struct{}{}
		go func(lock *Lock) {
			defer func() { <-slots; wg.Done() }()
			if !c.resumeOne(l, lock) {
				mu.Lock()
				settled = false
				mu.Unlock()
			}
		}(lock)
	}
	wg.Wait()
	return settled
}

// resumeOne resumes lock on l; false if it is still to resume.
func (c *Client) resumeOne(l *link, lock *Lock) bool {
	c.mu.Lock()
	f := map[string]any{"resource": lock.Resource, "token": lock.Token}
	if lock.ttl > 0 {
		f["ttl_ms"] = lock.ttl.Milliseconds()
	}
	c.mu.Unlock()
	if lock.renew {
		f["renew"] = true
	}
	if lock.Fence != nil {
		f["fence"] = *lock.Fence
	}
	if lock.leader { // a leadership names its term (docs/protocol.md#resume)
		f["election"], f["fence"] = true, lock.Term
	}
	if lock.Mode == ModePermit && lock.Permit != nil {
		f["permits"], f["permit"] = lock.permits, *lock.Permit
	}
	if lock.Mode == ModeShared {
		f["shared"] = true
	}
	if lock.owner != 0 {
		f["owner"] = lock.owner
	}
	if depth := lock.Depth(); depth > 1 && lock.live() { // one given back goes in one release
		f["depth"] = depth
	}
	ctx, cancel := context.WithDeadline(context.Background(), lock.ValidUntil())
	defer cancel()
	_, err := c.send(ctx, l, "resume", f, lock)
	if err == nil {
		return true
	}
	var message string
	switch e, _ := err.(*Error); {
	case ctx.Err() != nil:
		message = "its validity ran out before the agent's next run confirmed it"
	case e != nil && (e.Code == CodeNotHeld || e.Code == CodeForbidden ||
		e.Code == CodeKindMismatch || e.Code == CodeBadRequest):
		message = "the agent's next run could not resume it: " + e.Error()
	default:
		return false // no_quorum, shutting_down, too_many, the connection ended...: retry
	}
	c.mu.Lock()
	mine := c.resuming[lock.Token] == lock
	if mine {
		delete(c.resuming, lock.Token)
	}
	c.mu.Unlock()
	if mine {
		lock.markLost(ReasonAgentLost, message)
	}
	return true
}
