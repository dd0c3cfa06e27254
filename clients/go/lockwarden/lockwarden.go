// Package lockwarden is a client for the lockwarden agent's Unix socket (docs/protocol.md).
// Standard library only; Go 1.19+.
//
//	c, err := lockwarden.Dial("")
//	...
//	defer c.Close()
//	lock, err := c.Acquire(ctx, "db/migrations", lockwarden.AcquireOptions{
//		TTL: 30 * time.Second, Wait: 5 * time.Second, Renew: true})
//	if lockwarden.IsCode(err, lockwarden.CodeTimeout) { ... busy: someone else holds it ... }
//	defer lock.Release(ctx)
//	select { case <-lock.Lost(): ...stop the work... case <-done: }
//
// A Client is one connection, that is one agent session: its locks are released when it
// closes. A goroutine reads the socket continuously, hands each reply to the request with the
// same id, and closes a Lock's Lost channel when the agent pushes a `lost` event for it. A
// Client is safe for concurrent use.
//
// Elections (docs/elections.md): Campaign waits to lead a name and returns a Lock (Term set)
// whose Release resigns, lost like any lock; Leader says who leads; Observe returns an
// Observation whose Events channel receives the pushed `leader` events. Detached leases
// (AcquireOptions.Detach) outlive the connection: Client.Release and Client.Extend end or keep
// them by token from any connection.
package lockwarden

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"
)

// DefaultSocket is the agent's socket when $LOCKWARDEN_SOCKET is not set.
const DefaultSocket = "/run/lockwarden/lockwarden.sock"

// Error codes of the agent (docs/protocol.md#errors), plus two of the client's own.
const (
	CodeBadRequest   = "bad_request"
	CodeTimeout      = "timeout"   // someone else held the resource for all of Wait
	CodeNoQuorum     = "no_quorum" // too few masters answered: an outage, not contention
	CodeNotHeld      = "not_held"
	CodeTooMany      = "too_many"
	CodeForbidden    = "forbidden"
	CodeShuttingDown = "shutting_down"
	CodeKindMismatch = "kind_mismatch" // the resource is in use as another kind, or another K
	CodeInternal     = "internal"
	CodeDisconnected = "disconnected" // client: the connection to the agent ended
	CodeLost         = "lost"         // client: the lock was lost (ErrLost wraps it)
)

// Error is an error reply of the agent: Code to branch on, Message for people.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// IsCode reports whether err is an *Error with the given code.
func IsCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// DefaultSocketPath returns $LOCKWARDEN_SOCKET if set, else DefaultSocket.
func DefaultSocketPath() string {
	if p := os.Getenv("LOCKWARDEN_SOCKET"); p != "" {
		return p
	}
	return DefaultSocket
}

// reply is any line the agent sends: a reply (Ok set) or an event (Event set).
type reply struct {
	ID         *int64          `json:"id"`
	Ok         *bool           `json:"ok"`
	Error      string          `json:"error"`
	Message    string          `json:"message"`
	Event      string          `json:"event"`
	Reason     string          `json:"reason"`
	Resource   string          `json:"resource"`
	Token      string          `json:"token"`
	ValidityMs int64           `json:"validity_ms"`
	WaitedMs   int64           `json:"waited_ms"`
	Fence      *int64          `json:"fence"`
	Mode       string          `json:"mode"`
	Permit     *int            `json:"permit"`
	Locks      json.RawMessage `json:"locks"`
	Name       string          `json:"name"`
	Term       int64           `json:"term"`
	Leader     *Leader         `json:"leader"`
	Missed     bool            `json:"missed"`
	raw        []byte
	lock       *Lock        // set by the reader for a successful acquire or campaign
	obs        *Observation // set by the reader for a successful observe
}

type pending struct {
	op        string
	detach    bool        // an acquire of a detached lease
	ch        chan *reply // buffered (1): dispatch never blocks
	abandoned bool        // the caller's ctx ended before the reply came
}

// Client is one connection (session) to the agent.
type Client struct {
	conn    net.Conn
	writeMu sync.Mutex

	mu      sync.Mutex
	nextID  int64
	pending map[int64]*pending
	locks   map[string]*Lock        // by token
	obs     map[string]*Observation // by election name
	closed  error                   // set once the connection is gone
	done    chan struct{}
}

// Dial connects to the agent at path ("" means DefaultSocketPath()).
func Dial(path string) (*Client, error) {
	if path == "" {
		path = DefaultSocketPath()
	}
	conn, err := net.Dial("unix", path)
	if err != nil {
		return nil, err
	}
	c := &Client{conn: conn, pending: map[int64]*pending{}, locks: map[string]*Lock{},
		obs: map[string]*Observation{}, done: make(chan struct{})}
	go c.readLoop()
	return c, nil
}

// Close closes the connection; the agent releases every lock this client still holds.
func (c *Client) Close() error {
	err := c.conn.Close()
	<-c.done
	return err
}

// Request sends one request (fields may be nil) and returns the reply's raw JSON line. It
// returns an *Error when the reply has ok:false, or ctx.Err() if ctx ends first (a lock
// granted after that is released by the client).
func (c *Client) Request(ctx context.Context, op string, fields map[string]any) ([]byte, error) {
	r, err := c.request(ctx, op, fields)
	if err != nil {
		return nil, err
	}
	return r.raw, nil
}

func (c *Client) request(ctx context.Context, op string, fields map[string]any) (*reply, error) {
	msg := map[string]any{"op": op}
	for k, v := range fields {
		msg[k] = v
	}
	p := &pending{op: op, ch: make(chan *reply, 1), detach: fields["detach"] == true}
	c.mu.Lock()
	if c.closed != nil {
		c.mu.Unlock()
		return nil, c.closed
	}
	c.nextID++
	id := c.nextID
	c.pending[id] = p
	c.mu.Unlock()
	msg["id"] = id
	line, err := json.Marshal(msg)
	if err != nil {
		return nil, err
	}
	c.writeMu.Lock()
	_, err = c.conn.Write(append(line, '\n'))
	c.writeMu.Unlock()
	if err != nil {
		c.conn.Close() // the reader fails every pending request
	}
	select {
	case r := <-p.ch:
		if r.Ok == nil || !*r.Ok {
			return nil, &Error{Code: r.Error, Message: r.Message}
		}
		return r, nil
	case <-ctx.Done():
		c.mu.Lock()
		_, waiting := c.pending[id]
		p.abandoned = waiting // dispatch releases a grant that arrives later
		c.mu.Unlock()
		if !waiting { // the reply raced with ctx and is already in p.ch
			if r := <-p.ch; r.lock != nil {
				go r.lock.Release(context.Background())
			} else if r.obs != nil {
				go c.Unobserve(context.Background(), r.obs.Name)
			}
		}
		return nil, ctx.Err()
	}
}

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
}

// Kinds of hold (Lock.Mode).
const (
	ModeExclusive = "exclusive"
	ModeShared    = "shared"
	ModePermit    = "permit"
)

// Acquire takes the lock on resource. Errors: *Error with CodeTimeout (someone else held it for
// all of Wait), CodeNoQuorum (masters unavailable), CodeKindMismatch, CodeBadRequest, ...
func (c *Client) Acquire(ctx context.Context, resource string, o AcquireOptions) (*Lock, error) {
	f := map[string]any{"resource": resource, "wait_ms": o.Wait.Milliseconds()}
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
	r, err := c.request(ctx, "acquire", f)
	if err != nil {
		return nil, err
	}
	return r.lock, nil
}

// Release releases the hold of token on resource: this connection's, or a detached lease from
// any connection (CodeNotHeld: no such hold; CodeForbidden: another uid's lease).
func (c *Client) Release(ctx context.Context, resource, token string) error {
	_, err := c.request(ctx, "release", map[string]any{"resource": resource, "token": token})
	return err
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

// Ping checks that the agent is alive and reading.
func (c *Client) Ping(ctx context.Context) error {
	_, err := c.request(ctx, "ping", nil)
	return err
}

// Held lists the locks this connection holds (the raw "locks" array of the reply).
func (c *Client) Held(ctx context.Context) (json.RawMessage, error) {
	r, err := c.request(ctx, "held", nil)
	if err != nil {
		return nil, err
	}
	return r.Locks, nil
}

func (c *Client) readLoop() {
	scanner := bufio.NewScanner(c.conn)
	scanner.Buffer(make([]byte, 64*1024), 1<<20)
	for scanner.Scan() {
		r := &reply{raw: append([]byte(nil), scanner.Bytes()...)}
		if json.Unmarshal(r.raw, r) != nil {
			continue
		}
		c.dispatch(r)
	}
	c.mu.Lock()
	if c.closed == nil {
		c.closed = &Error{Code: CodeDisconnected, Message: "connection to the agent closed"}
	}
	for _, p := range c.pending {
		p.ch <- &reply{Error: CodeDisconnected, Message: c.closed.Error()}
	}
	c.pending = map[int64]*pending{}
	locks := c.locks
	c.locks = map[string]*Lock{}
	for _, o := range c.obs {
		o.end(CodeDisconnected)
	}
	c.obs = map[string]*Observation{}
	c.mu.Unlock()
	for _, l := range locks {
		l.markLost(CodeDisconnected)
	}
	close(c.done)
}

func (c *Client) dispatch(r *reply) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.Event == "lost" {
		if l := c.locks[r.Token]; l != nil {
			delete(c.locks, r.Token)
			l.markLost(r.Reason)
		}
		return
	}
	if r.Event == "leader" {
		if o := c.obs[r.Name]; o != nil {
			o.push(LeaderEvent{Name: r.Name, Leader: r.Leader, Term: r.Term, Missed: r.Missed})
		}
		return
	}
	if r.Event != "" {
		return
	}
	if r.ID == nil {
		if r.Ok != nil && !*r.Ok { // e.g. too_many before the agent closes the connection
			c.closed = &Error{Code: r.Error, Message: r.Message}
		}
		return
	}
	p := c.pending[*r.ID]
	if p == nil {
		return
	}
	delete(c.pending, *r.ID)
	// Registered before the next line is read, so an event right behind the reply (`lost`,
	// `leader`) finds what it is for.
	ok := r.Ok != nil && *r.Ok
	if ok && (p.op == "acquire" || p.op == "campaign") {
		r.lock = &Lock{c: c, Resource: r.Resource, Token: r.Token,
			Validity: time.Duration(r.ValidityMs) * time.Millisecond,
			Waited:   time.Duration(r.WaitedMs) * time.Millisecond, Fence: r.Fence,
			Mode: r.Mode, Permit: r.Permit, Detached: p.detach, lost: make(chan struct{})}
		if r.lock.Mode == "" {
			r.lock.Mode = ModeExclusive
		}
		if p.op == "campaign" {
			r.lock.Resource, r.lock.Term = r.Name, r.Term
		}
		if !p.detach { // no `lost` comes for a detached lease, and Close does not end it
			c.locks[r.Token] = r.lock
		}
		if p.abandoned { // the caller gave up: nobody else will release it
			go r.lock.Release(context.Background())
			return
		}
	}
	if ok && p.op == "observe" {
		r.obs = newObservation(r.Name, r.Leader)
		if old := c.obs[r.Name]; old != nil {
			old.end(CodeNotHeld)
		}
		c.obs[r.Name] = r.obs
		if p.abandoned {
			go c.Unobserve(context.Background(), r.Name)
			return
		}
	}
	p.ch <- r
}

// Lock is a granted lock.
type Lock struct {
	Resource string
	Token    string
	Validity time.Duration // at grant time; Extend returns the new one
	Waited   time.Duration
	Fence    *int64 // only when AcquireOptions.Fence
	Mode     string // ModeExclusive, ModeShared or ModePermit
	Permit   *int   // a semaphore's: which permit (0..Permits-1); nil otherwise
	// Term is a leadership's term (Campaign); 0 for a lock. Resource is then the election name.
	Term int64
	// Detached: a detached lease (AcquireOptions.Detach). Lost is never closed for it; it ends
	// at its TTL or when released by its token, from this client or another.
	Detached bool

	c        *Client
	mu       sync.Mutex
	released bool
	reason   string
	lost     chan struct{}
}

// Lost is closed when the lock ends without being released (the agent pushed `lost`, or the
// connection ended): stop the work it protected. LostReason says why.
func (l *Lock) Lost() <-chan struct{} { return l.lost }

// LostReason is "" while the lock is held, else renew_failed, expired, revoked or disconnected.
func (l *Lock) LostReason() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reason
}

// Err returns nil while the lock is held, else an *Error with CodeLost.
func (l *Lock) Err() error {
	if reason := l.LostReason(); reason != "" {
		return &Error{Code: CodeLost, Message: fmt.Sprintf("lock on %q was lost (%s)",
			l.Resource, reason)}
	}
	return nil
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
// or lost.
func (l *Lock) Release(ctx context.Context) error {
	l.mu.Lock()
	done := l.released || l.reason != ""
	l.mu.Unlock()
	if done {
		return nil
	}
	var err error
	if l.Term != 0 {
		err = l.c.Resign(ctx, l.Resource, l.Token)
	} else {
		err = l.c.Release(ctx, l.Resource, l.Token)
	}
	if err != nil && !IsCode(err, CodeNotHeld) {
		return err
	}
	l.mu.Lock()
	l.released = true
	l.mu.Unlock()
	l.c.mu.Lock()
	delete(l.c.locks, l.Token)
	l.c.mu.Unlock()
	return err
}

func (l *Lock) markLost(reason string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released || l.reason != "" {
		return
	}
	l.reason = reason
	close(l.lost)
}
