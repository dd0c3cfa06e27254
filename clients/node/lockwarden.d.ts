// Types of the lockwarden client (lockwarden.js): the agent's socket protocol is
// docs/protocol.md and docs/elections.md. Needs @types/node (EventEmitter, net.Socket,
// AbortSignal).

/// <reference types="node" />

import { EventEmitter } from 'events';
import { Socket } from 'net';

/** The socket used when neither a path nor $LOCKWARDEN_SOCKET is given. */
export declare const DEFAULT_SOCKET: '/run/lockwarden/lockwarden.sock';

/** $LOCKWARDEN_SOCKET if set, else DEFAULT_SOCKET. */
export declare function defaultSocket(): string;

/**
 * The machine codes of a LockError. The agent's: `timeout` (someone else held it for all of
 * waitMs), `no_quorum` (too few masters answered), `not_held` (that token holds nothing now),
 * `too_many` (an agent limit), `forbidden` (no access rule allows it), `bad_request` (a field
 * is wrong: the message says which), `kind_mismatch` (the resource is in use as another kind),
 * `would_deadlock` (this client's connection holds it already: it would wait for itself),
 * `shutting_down`, `internal`. The client's own: `disconnected` (the connection ended) and
 * `lost` (the lock was lost, see Lock.check).
 */
export type LockErrorCode =
  | 'timeout'
  | 'no_quorum'
  | 'not_held'
  | 'too_many'
  | 'forbidden'
  | 'bad_request'
  | 'kind_mismatch'
  | 'would_deadlock'
  | 'shutting_down'
  | 'internal'
  | 'disconnected'
  | 'lost';

/** An error reply of the agent, or the client's `disconnected` / `lost`. */
export declare class LockError extends Error {
  constructor(code: LockErrorCode, message: string);
  readonly name: 'LockError';
  /** What to branch on. */
  readonly code: LockErrorCode;
  /** The agent's message, for people (its wording may change). */
  readonly detail: string;
}

/**
 * Why a lock ended without being released: pushed by the agent (`renew_failed`, `expired`,
 * `revoked`), the connection's end (`disconnected`), a release that found it gone (`not_held`,
 * in withLock), or the agent's next run that could not take it over after the connection ended
 * (`agent_lost`: its resume was refused, or its validity ran out first).
 */
export type LostReason =
  | 'renew_failed'
  | 'expired'
  | 'revoked'
  | 'disconnected'
  | 'not_held'
  | 'agent_lost';

/** `exclusive`: a mutex's hold or the write hold; `shared`: a read hold; `permit`: a semaphore's. */
export type LockMode = 'exclusive' | 'shared' | 'permit';

/** Options of every acquire. */
export interface AcquireBaseOptions {
  /** How long the lock lives on the masters if not extended (agent default: 30000). */
  ttlMs?: number;
  /** How long to wait while someone else holds it (default 0: one attempt). */
  waitMs?: number;
  /** Stops waiting when aborted: rejects with signal.reason; a late grant is released. */
  signal?: AbortSignal;
  /**
   * Who in the program asks: an integer below 2^53 (a request's or job's id). Default: each
   * acquire its own. An acquire that could only wait for a hold of the same owner is refused
   * with `would_deadlock`.
   */
  owner?: number;
  /**
   * With an owner: a mutex or write hold this owner holds already is taken again (the same
   * Lock, `depth` one more); as many releases let go of it.
   */
  reentrant?: boolean;
}

/** The kind of hold: exclusive (optionally fenced), shared (a read hold), or a semaphore's. */
export type HoldOptions =
  | { permits?: undefined; shared?: false; fence?: boolean }
  | {
      permits?: undefined;
      /** A read (shared) hold: readers share it, the exclusive hold excludes them. */
      shared?: boolean;
      fence?: false;
    }
  | {
      /** One permit of a semaphore of this many (every holder must name the same). */
      permits?: number;
      shared?: false;
      /** Ask for a fencing token (Lock.fence). */
      fence?: boolean;
    };

/** Who keeps the lock: the agent renewing it for this connection, or nobody (a detached lease). */
export type LifetimeOptions =
  | {
      /** The agent extends it every ttl/3 while this connection is open. */
      renew?: boolean;
      detach?: false;
    }
  | {
      renew?: false;
      /** A detached lease: outlives this connection; release/extend it by token. */
      detach?: boolean;
    };

/**
 * Options of Client.acquire. What the agent refuses is refused here too: `permits` with
 * `shared`, `fence` with `shared`, `renew` with `detach`.
 */
export type AcquireOptions = AcquireBaseOptions & HoldOptions & LifetimeOptions;

/** Options of Client.acquireAll: as acquire's, each applied to every resource. */
export type AcquireAllOptions = Omit<AcquireBaseOptions, 'reentrant'> & HoldOptions & {
  /** The agent extends every lock of the set every ttl/3 while this connection is open. */
  renew?: boolean;
};

/**
 * Several locks held together (Client.acquireAll): emits 'lost' (reason) once one of them is
 * lost, when `signal` is aborted and the others are released.
 */
export declare class LockSet extends EventEmitter {
  /** Made by Client.acquireAll. */
  protected constructor();
  /** A Lock per resource, in their canonical (sorted) order. */
  readonly locks: Lock[];
  /** Null while every lock is held, else why the first was lost. */
  readonly lost: LostReason | null;
  readonly signal: AbortSignal;
  /** The lock of `resource`. */
  get(resource: string): Lock | undefined;
  /** Throws a LockError 'lost' if one of the locks was lost. */
  check(): void;
  /** Releases every lock of the set. */
  release(): Promise<void>;
  on(event: 'lost', listener: (reason: LostReason) => void): this;
  once(event: 'lost', listener: (reason: LostReason) => void): this;
}

/** A granted lock; emits 'lost' (reason) when it ends without being released. */
export declare class Lock extends EventEmitter {
  /** Locks are made by Client.acquire. */
  protected constructor();
  readonly client: Client;
  readonly resource: string;
  /** 40 hex characters naming this grant (release, extend). */
  readonly token: string;
  /** How long it is yours from the grant (or the last extend, or its resume), in ms. */
  readonly validityMs: number;
  /** How long the acquire waited for another holder, in ms. */
  readonly waitedMs: number;
  /** The fencing token if asked for (`fence: true`), else null. */
  readonly fence: number | null;
  readonly mode: LockMode;
  /** Which permit (0..K-1) of a semaphore's hold, else null. */
  readonly permit: number | null;
  /** How many acquires a reentrant hold stands for (1 otherwise); each release takes one. */
  readonly depth: number;
  /** A detached lease: no 'lost' comes for it, closing the client does not end it. */
  readonly detached: boolean;
  /** Null while held, else why it was lost. */
  readonly lost: LostReason | null;
  readonly released: boolean;
  /** Aborted when the lock is lost (its reason a LockError 'lost'): pass it to the work. */
  readonly signal: AbortSignal;
  /** Resets the ttl to ttlMs (agent default if omitted); resolves to the new validity in ms. */
  extend(ttlMs?: number): Promise<number>;
  /**
   * Gives it back; no-op if already released or lost. While the client resumes it, gives it up
   * (it stays on the masters until its ttl runs out).
   */
  release(): Promise<void>;
  /** Throws a LockError 'lost' if the lock was lost. */
  check(): void;

  on(event: 'lost', listener: (reason: LostReason) => void): this;
  once(event: 'lost', listener: (reason: LostReason) => void): this;
  off(event: 'lost', listener: (reason: LostReason) => void): this;
  addListener(event: 'lost', listener: (reason: LostReason) => void): this;
  removeListener(event: 'lost', listener: (reason: LostReason) => void): this;
  prependListener(event: 'lost', listener: (reason: LostReason) => void): this;
  prependOnceListener(event: 'lost', listener: (reason: LostReason) => void): this;
}

/** A won campaign: this client leads `name` with `term` while its connection lives (and, once
 * resumed with the same term, through the agent's next run after a restart). */
export declare class Leadership extends Lock {
  protected constructor();
  /** The election's name (also `resource`). */
  readonly name: string;
  /** This leadership's term: strictly greater than every earlier leader's. */
  readonly term: number;
  readonly mode: 'exclusive';
  /** The term: it is the fence of the leadership's grant. */
  readonly fence: number;
  readonly permit: null;
  readonly detached: false;
  /** Stops leading (as release()). */
  resign(): Promise<void>;
}

/** Options of Client.campaign. */
export interface CampaignOptions {
  ttlMs?: number;
  /** How long to wait while another leads (agent default: its max_wait_ms). */
  waitMs?: number;
  /** Stops waiting when aborted: rejects with signal.reason; a late leadership is resigned. */
  signal?: AbortSignal;
}

/** Who leads an election, as the agent reads it from the masters. */
export interface Leader {
  /** What the leader's campaign announced. */
  value: string;
  /** The id of the agent it campaigned through. */
  agent: string;
  host: string;
  pid: number;
  /** When it was elected, Unix ms on that agent's clock. */
  since: number;
  term: number;
}

/** A pushed change of leader. */
export interface LeaderEvent {
  event: 'leader';
  name: string;
  /** The new leader, or null: nobody leads now. */
  leader: Leader | null;
  /** The new leader's term; with leader null, the term of the one gone. */
  term: number;
  /** Changes before this one may have gone unseen. */
  missed: boolean;
}

/** Why an Observation ended. */
export type ObservationEndReason = 'unobserved' | 'observed_again' | 'disconnected';

/**
 * Follows an election (Client.observe): emits 'leader' (event) at every change and 'end'
 * (reason) once; also an async iterator of the events pushed from its making on, which
 * finishes at the end, or throws a LockError 'disconnected'.
 */
export declare class Observation extends EventEmitter implements AsyncIterable<LeaderEvent> {
  protected constructor();
  readonly client: Client;
  readonly name: string;
  /** The latest leader, updated before each 'leader' event. */
  readonly leader: Leader | null;
  /** The latest term known, null until one is. */
  readonly term: number | null;
  /** Null while it goes on, else why it ended. */
  readonly ended: ObservationEndReason | null;
  /** Stops the events (as Client.unobserve(name)); a no-op once this observation has ended. */
  unobserve(): Promise<void>;
  [Symbol.asyncIterator](): AsyncIterableIterator<LeaderEvent>;

  on(event: 'leader', listener: (event: LeaderEvent) => void): this;
  on(event: 'end', listener: (reason: ObservationEndReason) => void): this;
  once(event: 'leader', listener: (event: LeaderEvent) => void): this;
  once(event: 'end', listener: (reason: ObservationEndReason) => void): this;
  off(event: 'leader', listener: (event: LeaderEvent) => void): this;
  off(event: 'end', listener: (reason: ObservationEndReason) => void): this;
  addListener(event: 'leader', listener: (event: LeaderEvent) => void): this;
  addListener(event: 'end', listener: (reason: ObservationEndReason) => void): this;
  removeListener(event: 'leader', listener: (event: LeaderEvent) => void): this;
  removeListener(event: 'end', listener: (reason: ObservationEndReason) => void): this;
  prependListener(event: 'leader', listener: (event: LeaderEvent) => void): this;
  prependListener(event: 'end', listener: (reason: ObservationEndReason) => void): this;
  prependOnceListener(event: 'leader', listener: (event: LeaderEvent) => void): this;
  prependOnceListener(event: 'end', listener: (reason: ObservationEndReason) => void): this;
}

/** An entry of Client.held(): a hold of this connection, as the agent lists it. */
export interface HeldLock {
  resource: string;
  token: string;
  /** Time left now, in ms. */
  validity_ms: number;
  /** Whether the agent renews it. */
  renew: boolean;
  /** Only for a hold that is not exclusive. */
  mode?: 'shared' | 'permit';
  /** Only for a permit: the semaphore's K. */
  permits?: number;
  /** Only for a permit: which one. */
  permit?: number;
}

/** A master as Client.health() reports it. */
export interface HealthNode {
  addr: string;
  /** "off" (redis://), "verified" (rediss://, certificate checked) or "unverified". */
  tls: 'off' | 'verified' | 'unverified';
  up: boolean;
  /** Only while down: why (the last failed connect attempt). */
  error?: string;
  rtt_ms: number;
  quarantined: boolean;
  quarantine_left_ms?: number;
  quarantine_reason?: string;
}

/** The reply of Client.health(). */
export interface Health extends Reply {
  /** Votes a grant needs. */
  quorum: number;
  nodes: HealthNode[];
}

/** A successful reply to any request, as the agent sent it. */
export interface Reply {
  id: number;
  ok: true;
  [field: string]: unknown;
}

/** Options of Client.request. */
export interface RequestOptions {
  /** Rejects with signal.reason when aborted; what the late reply grants is given back. */
  signal?: AbortSignal;
}

/** Options of `new Client(socket, options)`. */
export interface ClientOptions {
  /**
   * The socket path to reconnect to when the connection ends, to resume the client's locks
   * through the agent's next run (Client.connect passes its own). Without it they are lost
   * (`disconnected`) when the connection ends.
   */
  path?: string;
}

/**
 * One connection (session) to the agent. When the connection ends without close() under locks
 * it holds, it reconnects to the same socket and resumes them: emits 'resuming' (reason), then
 * 'resumed' once connected again with each of them held again or lost (`agent_lost`). Emits
 * 'close' (reason) once done: the connection ended with nothing to resume, or no connection
 * came back before every lock to resume was lost, or close().
 */
export declare class Client extends EventEmitter {
  /**
   * Connects to path (default: $LOCKWARDEN_SOCKET, then DEFAULT_SOCKET). Rejects, when it
   * cannot, with an Error whose message names the socket (`cannot connect to the lockwarden
   * agent at PATH: ...`), with the socket error's `code` (e.g. `ENOENT`), `path`, and `cause`.
   */
  static connect(path?: string): Promise<Client>;
  /** A Client on a connected socket (Client.connect makes one). */
  constructor(socket: Socket, options?: ClientOptions);

  /** Takes a lock; rejects with a LockError (timeout, no_quorum, kind_mismatch, ...). */
  acquire(resource: string, options?: AcquireOptions): Promise<Lock>;
  /**
   * Takes every one of `resources` (2 to 16, distinct), all or none, within one waitMs, in one
   * canonical order (so two such acquires never wait for each other in a cycle).
   */
  acquireAll(resources: string[], options?: AcquireAllOptions): Promise<LockSet>;
  /**
   * Releases a hold by token: this connection's, or a detached lease from any connection. A
   * lock still being resumed is given up instead (it stays on the masters until its ttl).
   * Resolves to how many acquires a reentrant hold still stands for (0: released).
   */
  release(resource: string, token: string): Promise<number>;
  /**
   * Resets the ttl of a hold by token (as release); resolves to the new validity in ms.
   * Rejects `disconnected` while the lock is being resumed.
   */
  extend(resource: string, token: string, ttlMs?: number): Promise<number>;
  /** Acquires, runs fn(lock), releases; rejects with a LockError 'lost' if it was lost meanwhile. */
  withLock<T>(resource: string, options: AcquireOptions, fn: (lock: Lock) => T | PromiseLike<T>): Promise<T>;
  withLock<T>(resource: string, fn: (lock: Lock) => T | PromiseLike<T>): Promise<T>;

  /** Waits to lead election `name`, announcing `value`. */
  campaign(name: string, value: string, options?: CampaignOptions): Promise<Leadership>;
  /** Stops leading `name` (not_held: `token` does not lead it on this connection). */
  resign(name: string, token: string): Promise<void>;
  /** Who leads `name` now, or null. */
  leader(name: string): Promise<Leader | null>;
  /** Follows `name`; observing it again ends the previous Observation ('observed_again'). */
  observe(name: string): Promise<Observation>;
  /** Stops the events of `name` (not_held: not observed). */
  unobserve(name: string): Promise<void>;

  /** Sends any op; resolves to the reply, rejects with a LockError when ok is false. */
  request(op: string, fields?: Record<string, unknown>, options?: RequestOptions): Promise<Reply>;
  ping(): Promise<Reply>;
  /** The holds of this connection. */
  held(): Promise<HeldLock[]>;
  health(): Promise<Health>;
  /**
   * Closes the connection (the agent releases every lock it still holds) and stops resuming
   * (the locks still being resumed are lost, `disconnected`).
   */
  close(): Promise<void>;

  on(event: 'close' | 'resuming', listener: (reason: string) => void): this;
  on(event: 'resumed', listener: () => void): this;
  once(event: 'close' | 'resuming', listener: (reason: string) => void): this;
  once(event: 'resumed', listener: () => void): this;
  off(event: 'close' | 'resuming', listener: (reason: string) => void): this;
  off(event: 'resumed', listener: () => void): this;
  addListener(event: 'close' | 'resuming', listener: (reason: string) => void): this;
  addListener(event: 'resumed', listener: () => void): this;
  removeListener(event: 'close' | 'resuming', listener: (reason: string) => void): this;
  removeListener(event: 'resumed', listener: () => void): this;
  prependListener(event: 'close' | 'resuming', listener: (reason: string) => void): this;
  prependListener(event: 'resumed', listener: () => void): this;
  prependOnceListener(event: 'close' | 'resuming', listener: (reason: string) => void): this;
  prependOnceListener(event: 'resumed', listener: () => void): this;
}
