package lockwarden

import (
	"context"
	"sync"
	"time"
)

// Leader is who leads an election (docs/elections.md#leader).
type Leader struct {
	Value string `json:"value"` // what its campaign announced, e.g. host:port
	Agent string `json:"agent"` // the id of the agent it campaigned through
	Host  string `json:"host"`  // that agent's host name
	PID   int    `json:"pid"`   // the campaigning process
	Since int64  `json:"since"` // when it was elected, Unix ms on that agent's clock
	Term  int64  `json:"term"`
}

// LeaderEvent is a pushed change of an observed election.
type LeaderEvent struct {
	Name   string
	Leader *Leader // nil: nobody leads now
	Term   int64   // the new leader's term; with a nil Leader, the term of the one gone
	// Missed: changes before this one may have gone unseen (the term advanced by more than one,
	// the agent could not read the masters for a while, or Events was not read fast enough).
	Missed bool
}

// CampaignOptions are campaign's optional fields; zero values take the agent's defaults.
type CampaignOptions struct {
	TTL time.Duration // renewed every TTL/3; a leader whose agent dies is replaced about TTL later
	// Wait is how long to wait while another leads (0: the agent's max_wait_ms); CodeTimeout
	// once it runs out.
	Wait time.Duration
}

// Campaign waits to lead the election name, announcing value (e.g. host:port), and returns the
// leadership as a Lock: Term is its term, Resource the name, Token its token. It lasts while
// this client is connected; Lost is closed if it is lost (stop acting as the leader at once),
// Release resigns. Errors: *Error with CodeTimeout (another led for all of Wait), CodeNoQuorum,
// CodeKindMismatch, CodeForbidden, ...
func (c *Client) Campaign(ctx context.Context, name, value string, o CampaignOptions) (
	*Lock, error) {
	f := map[string]any{"name": name, "value": value}
	if o.TTL > 0 {
		f["ttl_ms"] = o.TTL.Milliseconds()
	}
	if o.Wait > 0 {
		f["wait_ms"] = o.Wait.Milliseconds()
	}
	r, err := c.request(ctx, "campaign", f)
	if err != nil {
		return nil, err
	}
	return r.lock, nil
}

// Resign stops leading name (CodeNotHeld: token does not lead it on this connection now).
func (c *Client) Resign(ctx context.Context, name, token string) error {
	_, err := c.request(ctx, "resign", map[string]any{"name": name, "token": token})
	return err
}

// Leader returns who leads name now, or nil when nobody does.
func (c *Client) Leader(ctx context.Context, name string) (*Leader, error) {
	r, err := c.request(ctx, "leader", map[string]any{"name": name})
	if err != nil {
		return nil, err
	}
	return r.Leader, nil
}

// Observe follows the election name: the Observation holds the leader now and receives every
// change on Events. Observing a name again starts it over (the old Observation ends).
func (c *Client) Observe(ctx context.Context, name string) (*Observation, error) {
	r, err := c.request(ctx, "observe", map[string]any{"name": name})
	if err != nil {
		return nil, err
	}
	return r.obs, nil
}

// Unobserve stops the events of name (CodeNotHeld: not observed); its Events channel closes.
func (c *Client) Unobserve(ctx context.Context, name string) error {
	if _, err := c.request(ctx, "unobserve", map[string]any{"name": name}); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if o := c.obs[name]; o != nil {
		delete(c.obs, name)
		o.end(CodeNotHeld)
	}
	return nil
}

// eventBuffer is how many events an Observation keeps for a slow reader. One more arriving
// drops the oldest kept, and says Missed itself.
const eventBuffer = 16

// Observation follows who leads an election (Client.Observe).
type Observation struct {
	Name    string
	Initial *Leader // the leader when the observation started (nil: nobody)

	events chan LeaderEvent // sent to by the client's reader only, closed by end

	mu     sync.Mutex
	ended  string
	latest *Leader
}

func newObservation(name string, leader *Leader) *Observation {
	return &Observation{Name: name, Initial: leader, latest: leader,
		events: make(chan LeaderEvent, eventBuffer)}
}

// Events receives the pushed `leader` events in term order. At most 16 wait to be read: one
// more drops the oldest waiting and comes with Missed set (the events read before it may not
// be every change). It is closed when the observation ends (Unobserve, observed again, or the
// connection's end: Err says which), after the events that came before.
func (o *Observation) Events() <-chan LeaderEvent { return o.events }

// Next waits for the next event. It returns ctx.Err() if ctx ends first, and Err() once the
// observation has ended and its remaining events have been taken.
func (o *Observation) Next(ctx context.Context) (LeaderEvent, error) {
	select {
	case e, ok := <-o.events:
		if !ok {
			return LeaderEvent{}, o.Err()
		}
		return e, nil
	case <-ctx.Done():
		return LeaderEvent{}, ctx.Err()
	}
}

// Leader is the latest leader known (from the observe reply or the last event pushed, read or
// not), nil if none.
func (o *Observation) Leader() *Leader {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.latest
}

// Err is nil while the observation runs, else an *Error: CodeDisconnected (the connection
// ended) or CodeNotHeld (unobserved, or observed again).
func (o *Observation) Err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ended == "" {
		return nil
	}
	return &Error{Code: o.ended, Message: "observation of " + o.Name + " ended"}
}

// push is called by the reader (holding the client's mu): it never blocks. The application may
// be taking events meanwhile, so the event that overflows is the one marked: a marked event
// already in the channel cannot be changed, and putting events back would reorder them.
func (o *Observation) push(e LeaderEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ended != "" {
		return
	}
	o.latest = e.Leader
	select {
	case o.events <- e:
		return
	default:
	}
	// Full: drop the oldest. The application may have just taken it instead; either way there
	// is room now.
	select {
	case <-o.events:
	default:
	}
	e.Missed = true
	o.events <- e
}

func (o *Observation) end(code string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ended == "" {
		o.ended = code
		close(o.events)
	}
}
