// Compiled, never run: uses every export of lockwarden.d.ts as a program would, and proves with
// `// @ts-expect-error` that wrong uses do not compile (tsc fails on one that does). test.sh
// compiles it with tsconfig.json in a project where the package is installed, together with
// README.md's TypeScript example.

import { EventEmitter } from 'events';
import { createConnection } from 'net';
import {
  AcquireOptions,
  CampaignOptions,
  Client,
  ClientOptions,
  DEFAULT_SOCKET,
  defaultSocket,
  Health,
  HeldLock,
  Leader,
  LeaderEvent,
  Leadership,
  Lock,
  LockError,
  LockErrorCode,
  LockMode,
  LostReason,
  Observation,
  ObservationEndReason,
  Reply,
  RequestOptions,
} from 'lockwarden';

// What a value's type is, checked both ways.
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
function assertType<T extends true>(): T | void {}

export async function locks(): Promise<void> {
  const socket: string = defaultSocket();
  const fixed: '/run/lockwarden/lockwarden.sock' = DEFAULT_SOCKET;
  const client: Client = await Client.connect(socket === fixed ? undefined : socket);
  const other = new Client(createConnection(socket));
  const clientOptions: ClientOptions = { path: socket };
  const resuming = new Client(createConnection(socket), clientOptions);
  // @ts-expect-error the path is a string
  new Client(createConnection(socket), { path: 1 });
  const emitter: EventEmitter = client;
  client.on('close', (reason: string) => console.log(reason, emitter.listenerCount('close')));
  // @ts-expect-error Client emits 'close', not 'closed'
  client.on('closed', () => {});
  // Resuming the locks through the agent's next run.
  resuming.on('resuming', (reason) => {
    assertType<Equal<typeof reason, string>>();
  });
  resuming.once('resumed', () => console.log('held again, or lost'));
  // @ts-expect-error 'resumed' comes with no argument
  resuming.on('resumed', (reason: string) => console.log(reason));

  // A mutex: plain, fenced, renewed, extended.
  const lock: Lock = await client.acquire('db/migrations', { ttlMs: 30000, waitMs: 5000, renew: true });
  const token: string = lock.token;
  const validity: number = await lock.extend(60000);
  const sameValidity: number = await lock.extend();
  const waited: number = lock.waitedMs + lock.validityMs + validity + sameValidity;
  const mode: LockMode = lock.mode;
  const fence: number | null = lock.fence;
  const permit: number | null = lock.permit;
  const lost: LostReason | null = lock.lost;
  const flags: boolean = lock.detached || lock.released;
  const owner: Client = lock.client;
  console.log(token, waited, mode, fence, permit, lost, flags, owner === client, lock.resource);
  lock.on('lost', (reason) => {
    assertType<Equal<typeof reason, LostReason>>();
  });
  lock.once('lost', (reason: LostReason) => console.log(reason));
  lock.on('lost', (reason) => {
    if (reason === 'agent_lost') console.log('the agent came back without it');
  });
  // @ts-expect-error a Lock emits 'lost' only
  lock.on('lose', () => {});
  // @ts-expect-error the reason is a LostReason, not a number
  lock.on('lost', (reason: number) => console.log(reason));
  lock.check();
  await fetchLike({ signal: lock.signal });
  await lock.release();
  // An owner's reentrant hold: its depth, and what a release by token leaves.
  const deep = await client.acquire('db', { owner: 7, reentrant: true });
  const depth: number = deep.depth;
  const left: number = await client.release('db', deep.token);
  console.log(depth, left);
  // @ts-expect-error an owner is a number
  await client.acquire('db', { owner: 'me' });
  // Several resources: a LockSet.
  const set = await client.acquireAll(['db', 'cache'], { ttlMs: 5000, renew: true });
  const members: Lock[] = set.locks;
  set.on('lost', (reason: LostReason) => console.log(reason, members.length, set.get('db')?.token));
  await set.release();
  // @ts-expect-error a set is not reentrant
  await client.acquireAll(['db', 'cache'], { reentrant: true });
  // @ts-expect-error a Lock's token is read-only
  lock.token = 'x';
  // @ts-expect-error locks are made by Client.acquire
  new Lock();
  // @ts-expect-error no such mode
  if (lock.mode === 'writer') console.log('never');

  const fenced = await client.acquire('db/primary', { fence: true });
  if (fenced.fence !== null) console.log(fenced.fence + 1);
  // @ts-expect-error fence may be null: not asked for
  console.log(fenced.fence + 1);

  // A semaphore, a read hold, a detached lease.
  const lease = await client.acquire('pool', { permits: 4 });
  const reader = await client.acquire('config', { shared: true, waitMs: 1000 });
  const detached = await client.acquire('backup/nightly', { ttlMs: 3600000, detach: true });
  await client.extend(detached.resource, detached.token, 3600000);
  const newValidity: number = await client.extend('backup/nightly', detached.token);
  await client.release('backup/nightly', detached.token);
  console.log(lease.permit, reader.mode, newValidity);
  // Options built from variables, as programs do.
  const maybePermits: number | undefined = Math.random() > 0.5 ? 3 : undefined;
  const isReader: boolean = Math.random() > 0.5;
  const options: AcquireOptions = { permits: maybePermits, ttlMs: 1000 };
  await client.acquire('pool', options);
  await client.acquire('config', { shared: isReader });
  await client.acquire('config', { renew: isReader });
  await client.acquire('config', { detach: isReader });
  // @ts-expect-error a semaphore has no shared holds
  await client.acquire('pool', { permits: 2, shared: true });
  // @ts-expect-error a reader is not fenced
  await client.acquire('config', { shared: true, fence: true });
  // @ts-expect-error a detached lease is not renewed
  await client.acquire('backup', { detach: true, renew: true });
  // @ts-expect-error ttlMs is a number of ms
  await client.acquire('db', { ttlMs: '10s' });
  // @ts-expect-error no such option
  await client.acquire('db', { ttl: 1000 });
  // @ts-expect-error the resource is required
  await client.acquire();

  // AbortSignal: a wait cut short.
  const controller = new AbortController();
  const optionsWithSignal: AcquireOptions = { waitMs: 30000, signal: controller.signal };
  const waiting = client.acquire('db/migrations', optionsWithSignal);
  controller.abort();
  await waiting.catch((err: unknown) => {
    if (err instanceof Error && err.name === 'AbortError') return null;
    throw err;
  });
  // @ts-expect-error signal is an AbortSignal, not its controller
  await client.acquire('db', { signal: controller });

  // withLock: the result of fn comes back typed.
  const rows: number = await client.withLock('db/migrations', { ttlMs: 30000, renew: true },
    async (held: Lock) => {
      held.check();
      return 42;
    });
  const label: string = await client.withLock('db/migrations', (held) => held.resource);
  console.log(rows, label);
  // @ts-expect-error fn gets the Lock, and its result is a number, not a string
  const wrong: string = await client.withLock('db', {}, (held: Lock) => held.validityMs);
  console.log(wrong);

  // Errors: the code is a union of literals.
  try {
    await client.acquire('db', { waitMs: 0 });
  } catch (err) {
    if (err instanceof LockError) {
      const code: LockErrorCode = err.code;
      const detail: string = err.detail;
      const name: 'LockError' = err.name;
      switch (err.code) {
        case 'timeout': case 'no_quorum': case 'not_held': case 'too_many': case 'forbidden':
        case 'bad_request': case 'kind_mismatch': case 'would_deadlock': case 'shutting_down':
        case 'internal':
        case 'disconnected': case 'lost':
          console.log(code, detail, name);
          break;
        default: {
          const never: never = err.code; // every code is handled above
          console.log(never);
        }
      }
      // @ts-expect-error not a code
      if (err.code === 'timed_out') console.log('never');
    }
  }
  const made = new LockError('lost', 'made here');
  console.log(made.message);
  // @ts-expect-error not a code
  console.log(new LockError('oops', 'no'));

  // Raw requests.
  const reply: Reply = await client.request('locks', {}, { signal: new AbortController().signal } as RequestOptions);
  const pong: Reply = await client.ping();
  const held: HeldLock[] = await client.held();
  const health: Health = await client.health();
  console.log(reply.ok, pong.id, held.map((h) => [h.resource, h.validity_ms, h.renew, h.mode, h.permits, h.permit]));
  console.log(health.quorum, health.nodes.map((n) => [n.addr, n.tls, n.up, n.error, n.rtt_ms, n.quarantined, n.quarantine_left_ms]));
  // @ts-expect-error a held lock's fields are as the agent sends them
  console.log(held[0].validityMs);
  await other.close();
  await resuming.close();
  await client.close();
}

export async function elections(client: Client): Promise<void> {
  const options: CampaignOptions = { ttlMs: 10000, waitMs: 5000, signal: new AbortController().signal };
  const leadership: Leadership = await client.campaign('jobs', 'host-a:8080', options);
  const asLock: Lock = leadership;
  const term: number = leadership.term;
  const fence: number = leadership.fence;
  const name: string = leadership.name;
  console.log(asLock.token, term, fence, name);
  leadership.on('lost', (reason: LostReason) => console.log(reason));
  await leadership.resign();
  await client.resign('jobs', leadership.token);
  // @ts-expect-error the value is required
  await client.campaign('jobs');
  // @ts-expect-error no shared leadership
  await client.campaign('jobs', 'v', { shared: true });

  const leader: Leader | null = await client.leader('jobs');
  if (leader) {
    const fields: [string, string, string, number, number, number] =
      [leader.value, leader.agent, leader.host, leader.pid, leader.since, leader.term];
    console.log(fields);
  }
  // @ts-expect-error nobody may lead
  console.log((await client.leader('jobs')).value);

  const observation: Observation = await client.observe('jobs');
  const current: Leader | null = observation.leader;
  const known: number | null = observation.term;
  const ended: ObservationEndReason | null = observation.ended;
  console.log(current, known, ended, observation.name, observation.client === client);
  observation.on('leader', (event: LeaderEvent) => {
    const fields: [string, Leader | null, number, boolean] = [event.name, event.leader, event.term, event.missed];
    console.log(fields);
  });
  observation.once('end', (reason) => {
    assertType<Equal<typeof reason, ObservationEndReason>>();
  });
  // @ts-expect-error an Observation emits 'leader' and 'end'
  observation.on('lost', () => {});
  // @ts-expect-error the 'end' listener gets a reason, not an event
  observation.on('end', (event: LeaderEvent) => console.log(event));
  for await (const event of observation) {
    assertType<Equal<typeof event, LeaderEvent>>();
    if (event.missed) break;
  }
  const events: AsyncIterableIterator<LeaderEvent> = observation[Symbol.asyncIterator]();
  const next: IteratorResult<LeaderEvent> = await events.next();
  console.log(next.done ? 'ended' : next.value.term);
  await observation.unobserve();
  await client.unobserve('jobs');
  // @ts-expect-error observations are made by Client.observe
  new Observation();
}

async function fetchLike(options: { signal: AbortSignal }): Promise<void> {
  if (options.signal.aborted) throw options.signal.reason;
}
