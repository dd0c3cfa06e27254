// The client: one connection to the agent, its requests and the reader that dispatches replies
// and events.

package lockwarden

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
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
	// this Client holds the resource already: the acquire would wait for itself
	CodeWouldDeadlock = "would_deadlock"
	CodeInternal      = "internal"
	CodeDisconnected  = "disconnected" // client: the connection to the agent ended
	CodeLost          = "lost"         // client: the lock was lost (ErrLost wraps it)
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
	Depth      int             `json:"depth"`
	Resources  []reply         `json:"resources"` // an acquire of several: each one's grant
	Locks      json.RawMessage `json:"locks"`
	Name       string          `json:"name"`
	Term       int64           `json:"term"`
	Leader     *Leader         `json:"leader"`
	Missed     bool            `json:"missed"`
	raw        []byte
	lock       *Lock        // set by the reader for a successful acquire or campaign
	locks      []*Lock      // set by the reader for a successful acquire of several resources
	obs        *Observation // set by the reader for a successful observe
}

type pending struct {
	op        string
	fields    map[string]any // the request's fields
	sent      time.Time      // when it was sent: a validity in the reply counts from then
	detach    bool           // an acquire of a detached lease
	resume    *Lock          // a resume's lock
	ch        chan *reply    // buffered (1): dispatch never blocks
	abandoned bool           // the caller's ctx ended before the reply came
}

// link is one connection to the agent, with the requests awaiting its replies. A Client has a
// new one after each reconnection (resume.go).
type link struct {
	conn    net.Conn
	pending map[int64]*pending
	refused error         // an error reply without an id: every request fails with it from then on
	broken  bool          // the agent broke the protocol (the client ended the connection)
	wake    chan struct{} // (1) a renewed lock is now held through it: its held poller looks again
	done    chan struct{} // closed once its reader has ended
}

// Client is one connection (session) to the agent, and its next ones when it reconnects to take
// its locks over after the agent restarted (see the package documentation).
type Client struct {
	path    string
	writeMu sync.Mutex

	mu       sync.Mutex
	nextID   int64
	owners   int64                   // the owner of the last acquire that named none
	cur      *link                   // nil while there is no connection
	down     error                   // what requests get while cur is nil
	shut     bool                    // Close was called
	closing  chan struct{}           // closed by Close
	locks    map[string]*Lock        // held through cur, by token
	resuming map[string]*Lock        // held through the agent's earlier run, by token
	resumer  chan struct{}           // while the resumer runs: closed when it ends
	obs      map[string]*Observation // by election name
}

// UnreachableError is the error of Dial and DialContext when they cannot connect to the agent:
// it names the socket tried, and wraps the cause (errors.Is(err, syscall.ENOENT) for a socket
// that does not exist, context.DeadlineExceeded when ctx ended first).
type UnreachableError struct {
	Path string
	Err  error
}

func (e *UnreachableError) Error() string {
	cause := e.Err
	var op *net.OpError // "dial unix PATH: connect: ...": the path is said once, here
	if errors.As(cause, &op) && op.Err != nil {
		cause = op.Err
	}
	return "lockwarden: cannot connect to the agent at " + e.Path + ": " + cause.Error()
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// Dial connects to the agent at path ("" means DefaultSocketPath()); an *UnreachableError when
// it cannot.
func Dial(path string) (*Client, error) {
	return DialContext(context.Background(), path)
}

// DialContext connects to the agent at path ("" means DefaultSocketPath()), giving up when ctx
// ends first.
func DialContext(ctx context.Context, path string) (*Client, error) {
	if path == "" {
		path = DefaultSocketPath()
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, &UnreachableError{Path: path, Err: err}
	}
	c := &Client{path: path, closing: make(chan struct{}), locks: map[string]*Lock{},
		resuming: map[string]*Lock{}, obs: map[string]*Observation{}}
	c.mu.Lock()
	c.install(conn)
	c.mu.Unlock()
	return c, nil
}

// install makes conn the client's connection (c.mu held).
func (c *Client) install(conn net.Conn) *link {
	l := &link{conn: conn, pending: map[int64]*pending{}, wake: make(chan struct{}, 1),
		done: make(chan struct{})}
	c.cur, c.down = l, nil
	go c.readLoop(l)
	go c.pollHeld(l)
	return l
}

// Close closes the connection; the agent releases every lock this client still holds. It also
// stops a reconnection: the locks still to be resumed are lost (reason disconnected).
func (c *Client) Close() error {
	c.mu.Lock()
	if !c.shut {
		c.shut = true
		close(c.closing)
	}
	l, resumer := c.cur, c.resumer
	c.mu.Unlock()
	var err error
	if l != nil {
		err = l.conn.Close()
		<-l.done
	}
	if resumer != nil {
		<-resumer
	}
	c.mu.Lock()
	left := c.resuming
	c.resuming = map[string]*Lock{}
	c.mu.Unlock()
	for _, lock := range left {
		lock.markLost(CodeDisconnected, "")
	}
	if errors.Is(err, net.ErrClosed) { // closed already, when the connection ended
		return nil
	}
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
	return c.send(ctx, nil, op, fields, nil)
}

// send sends a request on the client's connection (on: only if it is still that one) and waits
// for the reply. resume is the lock a resume request is for.
func (c *Client) send(ctx context.Context, on *link, op string, fields map[string]any,
	resume *Lock) (*reply, error) {
	msg := map[string]any{"op": op}
	for k, v := range fields {
		msg[k] = v
	}
	p := &pending{op: op, fields: fields, ch: make(chan *reply, 1),
		detach: fields["detach"] == true, resume: resume}
	c.mu.Lock()
	l := c.cur
	switch {
	case l == nil:
		err := c.down
		c.mu.Unlock()
		return nil, err
	case on != nil && on != l:
		c.mu.Unlock()
		return nil, &Error{Code: CodeDisconnected, Message: "connection to the agent closed"}
	case l.refused != nil:
		c.mu.Unlock()
		return nil, l.refused
	}
	c.nextID++
	id := c.nextID
	p.sent = time.Now()
	l.pending[id] = p
	c.mu.Unlock()
	msg["id"] = id
	line, err := json.Marshal(msg)
	if err != nil {
		c.mu.Lock()
		delete(l.pending, id)
		c.mu.Unlock()
		return nil, err
	}
	c.writeMu.Lock()
	_, err = l.conn.Write(append(line, '\n'))
	c.writeMu.Unlock()
	if err != nil {
		l.conn.Close() // the reader fails every pending request
	}
	select {
	case r := <-p.ch:
		if r.Ok == nil || !*r.Ok {
			return nil, &Error{Code: r.Error, Message: r.Message}
		}
		return r, nil
	case <-ctx.Done():
		c.mu.Lock()
		_, waiting := l.pending[id]
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

// Ping checks that the agent is alive and reading.
func (c *Client) Ping(ctx context.Context) error {
	_, err := c.request(ctx, "ping", nil)
	return err
}

// Held lists the locks this connection holds (the raw "locks" array of the reply: resource,
// token, validity_ms, renew, and mode, permits, permit for a hold that is not exclusive).
func (c *Client) Held(ctx context.Context) (json.RawMessage, error) {
	r, err := c.request(ctx, "held", nil)
	if err != nil {
		return nil, err
	}
	return r.Locks, nil
}

// Health is the agent's view of its Redis masters (docs/protocol.md#health).
type Health struct {
	Quorum int          `json:"quorum"` // votes a grant needs: a strict majority of the masters
	Nodes  []HealthNode `json:"nodes"`
}

// HealthNode is one master as the agent sees it.
type HealthNode struct {
	Addr  string  `json:"addr"`   // host:port
	TLS   string  `json:"tls"`    // "off", "verified" or "unverified" (any certificate accepted)
	Up    bool    `json:"up"`     // connected and answering: its votes are asked for
	Error string  `json:"error"`  // while !Up: why (the last failed connect attempt)
	RTTMs float64 `json:"rtt_ms"` // the last health check's round trip; meaningless when !Up
	// Quarantined: the master restarted lately and may have forgotten locks; its votes do not
	// count toward a grant for QuarantineLeftMs more.
	Quarantined      bool   `json:"quarantined"`
	QuarantineLeftMs int64  `json:"quarantine_left_ms"`
	QuarantineReason string `json:"quarantine_reason"`
}

// Health asks the agent how its masters are. Fewer than Quorum nodes up and not quarantined
// means acquires and extends fail with CodeNoQuorum.
func (c *Client) Health(ctx context.Context) (*Health, error) {
	raw, err := c.Request(ctx, "health", nil)
	if err != nil {
		return nil, err
	}
	h := &Health{}
	if err := json.Unmarshal(raw, h); err != nil {
		return nil, err
	}
	return h, nil
}

// readLoop reads every line the agent sends on l until the connection ends or the agent breaks
// the protocol; then it closes the connection (the agent releases what it held) and fails the
// pending requests with CodeDisconnected. The observations end and the leaderships are lost;
// the locks are resumed through the agent's next run (resume.go) when the connection ended of
// itself, and lost otherwise (the user's Close, a protocol break, an error reply without an id).
// A line has no length limit: a `locks` reply lists every lock held through the agent, however
// many.
func (c *Client) readLoop(l *link) {
	in := bufio.NewReaderSize(l.conn, 64*1024)
	why := "connection to the agent closed"
	for {
		line, err := in.ReadBytes('\n') // a copy of its own
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				why = "connection to the agent failed: " + err.Error()
			}
			break
		}
		r := &reply{raw: line[:len(line)-1]}
		if err := json.Unmarshal(r.raw, r); err != nil {
			why, l.broken = "the agent broke the protocol: "+err.Error(), true
			break
		}
		if r.Event == "" && r.Ok == nil {
			why = "the agent broke the protocol: a line neither a reply nor an event"
			l.broken = true
			break
		}
		c.dispatch(l, r)
	}
	l.conn.Close()
	c.mu.Lock()
	gone := l.refused
	if gone == nil {
		gone = &Error{Code: CodeDisconnected, Message: why}
	}
	for _, p := range l.pending {
		p.ch <- &reply{Error: CodeDisconnected, Message: gone.Error()}
	}
	l.pending = map[int64]*pending{}
	if c.cur == l {
		c.cur, c.down = nil, gone
	}
	resumable := !c.shut && !l.broken && l.refused == nil
	var lost []*Lock
	for token, lock := range c.locks {
		if resumable {
			c.resuming[token] = lock
		} else {
			lost = append(lost, lock)
		}
	}
	c.locks = map[string]*Lock{}
	for _, o := range c.obs {
		o.end(CodeDisconnected)
	}
	c.obs = map[string]*Observation{}
	if len(c.resuming) > 0 && c.resumer == nil && !c.shut {
		c.resumer = make(chan struct{})
		go c.resume(c.resumer)
	}
	c.mu.Unlock()
	for _, lock := range lost {
		lock.markLost(CodeDisconnected, "")
	}
	close(l.done)
}

func (c *Client) dispatch(l *link, r *reply) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.Event == "lost" {
		if lock := c.locks[r.Token]; lock != nil {
			delete(c.locks, r.Token)
			lock.markLost(r.Reason, r.Message)
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
			l.refused = &Error{Code: r.Error, Message: r.Message}
		}
		return
	}
	p := l.pending[*r.ID]
	if p == nil {
		return
	}
	delete(l.pending, *r.ID)
	validUntil := p.sent.Add(time.Duration(r.ValidityMs) * time.Millisecond)
	// Registered before the next line is read, so an event right behind the reply (`lost`,
	// `leader`) finds what it is for.
	ok := r.Ok != nil && *r.Ok
	if ok && p.op == "acquire" && len(r.Resources) > 0 {
		if c.grantedAll(l, p, r) {
			return
		}
	} else if again := c.locks[r.Token]; ok && p.op == "acquire" && again != nil && p.fields["reentrant"] == true {
		// A reentrant hold taken again: the same Lock, one more acquire deep.
		again.reentered(r.Depth, p.sent, validUntil)
		r.lock = again
	} else if ok && (p.op == "acquire" || p.op == "campaign") {
		r.lock = &Lock{c: c, Resource: r.Resource, Token: r.Token,
			Validity: time.Duration(r.ValidityMs) * time.Millisecond,
			Waited:   time.Duration(r.WaitedMs) * time.Millisecond, Fence: r.Fence,
			Mode: r.Mode, Permit: r.Permit, Detached: p.detach, lost: make(chan struct{}),
			ttl: fieldMs(p.fields, "ttl_ms"), renew: p.fields["renew"] == true || p.op == "campaign",
			leader: p.op == "campaign", validSince: p.sent, validUntil: validUntil, depth: 1}
		r.lock.owner, _ = p.fields["owner"].(int64)
		if permits, ok := p.fields["permits"].(int); ok {
			r.lock.permits = permits
		}
		if r.lock.Mode == "" {
			r.lock.Mode = ModeExclusive
		}
		if p.op == "campaign" {
			r.lock.Resource, r.lock.Term = r.Name, r.Term
		}
		if !p.detach { // no `lost` comes for a detached lease, and Close does not end it
			c.locks[r.Token] = r.lock
			if r.lock.renew {
				l.poke()
			}
		}
		if p.abandoned { // the caller gave up: nobody else will release it
			go r.lock.Release(context.Background())
			return
		}
	}
	if ok && p.op == "extend" {
		token, _ := p.fields["token"].(string)
		if lock := c.locks[token]; lock != nil {
			lock.extended(fieldMs(p.fields, "ttl_ms"), p.sent, validUntil)
		}
	}
	if ok && p.op == "resume" {
		lock := p.resume
		mine := c.resuming[lock.Token] == lock
		if mine {
			delete(c.resuming, lock.Token)
		}
		if mine && lock.live() {
			c.locks[lock.Token] = lock
			lock.validFrom(p.sent, validUntil)
			if lock.renew {
				l.poke()
			}
		} else { // released or lost meanwhile (its validity ran out, Close): give it back
			go c.send(context.Background(), l, "release",
				map[string]any{"resource": lock.Resource, "token": lock.Token}, nil)
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

// fieldMs is a request's duration field in ms, as a Duration (0 when absent).
func fieldMs(fields map[string]any, name string) time.Duration {
	ms, _ := fields[name].(int64)
	return time.Duration(ms) * time.Millisecond
}

// poke tells l's held poller to look at the locks again.
func (l *link) poke() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}
