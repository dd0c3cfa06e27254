// Package lockwarden is the Go client of the lockwarden agent: distributed locks (Redlock over
// N Redis masters), semaphores, read-write locks, leader elections and detached leases, asked
// for over the agent's Unix socket. It uses the standard library only (Go 1.19+).
//
// # Connections are sessions
//
// A [Client] is one connection to the agent, and one agent session: everything it holds is
// released by the agent when the connection ends ([Client.Close], or the process dying), except
// detached leases. Keep the Client open for as long as you hold locks. A Client is safe for
// concurrent use: a goroutine reads the socket continuously and hands each reply to the request
// with the same id, so one slow acquire does not hold up the others.
//
// Every call that waits for the agent takes a [context.Context]. If ctx ends first the call
// returns ctx.Err(), and a lock, leadership or observation granted after that is given back by
// the client.
//
// # Kinds of hold
//
// [Client.Acquire] takes a lock on a resource name, returned as a [*Lock]:
//
//   - a mutex: the default, exclusive hold. [AcquireOptions.Fence] adds a fencing token
//     ([Lock.Fence]) that strictly increases from grant to grant of the resource;
//   - one permit of a semaphore of K ([AcquireOptions.Permits] = K): at most K holders at once;
//   - a read hold of a read-write lock ([AcquireOptions.Shared]): readers share it, and the
//     exclusive hold (the write hold) excludes them;
//   - a detached lease ([AcquireOptions.Detach]): it outlives the connection, until its TTL runs
//     out or [Client.Release] by its token, which [Client.Extend] keeps alive, from any
//     connection of the same uid.
//
// A lock lives for its TTL; [AcquireOptions.Renew] makes the agent extend it every TTL/3 while
// the connection is open, or call [Lock.Extend] yourself. When the agent reports a lock lost
// (renewal failed, it expired, an operator revoked it) or the connection ends and the lock
// cannot be resumed, [Lock.Lost] is closed: stop the protected work at once, someone else may
// hold the lock now.
//
// # When the agent restarts
//
// The agent leaves its clients' locks on the masters when it stops or dies, and its next run on
// the same socket can hand them back. So when the connection ends of itself while the Client
// holds locks, they are not lost at once: the Client connects again to the same socket (backing
// off from 50 ms to 500 ms) and resumes each lock there, as the same [*Lock]. A lock the next
// run cannot resume, or whose validity ([Lock.ValidUntil]) runs out first, is lost with reason
// [ReasonAgentLost]. Leaderships are resumed as locks are (by their term); observations and
// detached leases are not. Requests made meanwhile fail with CodeDisconnected; [Client.Close]
// stops reconnecting.
//
// # Elections
//
// [Client.Campaign] waits to lead an election and returns the leadership as a [*Lock] whose
// Term strictly increases from leader to leader; its Release resigns and its Lost channel works
// as for a lock. [Client.Leader] says who leads. [Client.Observe] follows an election: the
// [Observation]'s Events channel receives each change of leader, in term order, with Missed set
// when changes before it may have gone unseen.
//
// # Errors
//
// A refusal of the agent is an [*Error] carrying its machine code (CodeTimeout: someone else
// held the resource for all of the wait; CodeNoQuorum: too few masters answered, an outage; and
// so on); test it with [IsCode]. The protocol is described in the lockwarden repository's
// docs/protocol.md and docs/elections.md.
package lockwarden
