package io.lockwarden.client;

import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * A connection to the lockwarden agent's Unix socket (docs/protocol.md), that is one agent
 * session: the locks it takes belong to it, and closing it (or the process ending) makes the
 * agent release them on every master.
 *
 * <pre>{@code
 * try (Client client = Client.connect();
 *      Lock lock = client.acquire("db/migrations", AcquireOptions.builder()
 *          .ttl(Duration.ofSeconds(30)).waitFor(Duration.ofSeconds(5)).renew(true).build())) {
 *   migrate(lock);  // check lock.isLost() between steps
 * }
 * }</pre>
 *
 * <p>Every operation comes blocking ({@code acquire}) and as a {@link CompletableFuture}
 * ({@code acquireAsync}). A failed one throws (or completes the future with) a {@link
 * LockException} carrying the agent's code. A blocking call whose thread is interrupted throws
 * {@link ErrorCode#INTERRUPTED}; a future that is cancelled (or completed by the caller, e.g.
 * {@code orTimeout}) before the reply stops the client's wait. The agent goes on with the
 * request, and what it grants after that (a lock, a leadership, an observation) is given back
 * by the client at once.
 *
 * <p>A client is safe for use by many threads. Requests are written by the client's writer
 * thread, replies and events read by its reader thread; futures complete on the executor
 * CompletableFuture's async methods use; the {@code lost} and {@code leader} listeners run on
 * the client's listener thread. None of these runs your code but the listeners and the
 * futures' dependents, which may call the client's blocking methods.
 *
 * <p><b>When the agent restarts.</b> The agent leaves its clients' locks on the masters when it
 * stops or dies (docs/safety.md &sect;11). If the connection ends without {@link #close()} while
 * this client holds locks, they are not lost at once: the client connects again to the same
 * socket (after 50 ms, doubling up to 500 ms between attempts) and resumes each lock through
 * the agent's next run; a resumed {@link Lock} works as before (release, extend, renewal by the
 * agent). A lock the next run answers is gone, or whose validity runs out before it is resumed,
 * is lost with reason {@code agent_lost}. To know that validity, the client reads {@code held}
 * every third of the smallest ttl of its renewed locks while connected. Leaderships,
 * observations and detached leases are not resumed: they end as before. Requests made while
 * the client reconnects fail with {@link ErrorCode#DISCONNECTED}.
 */
public final class Client implements AutoCloseable {
  /** The agent's socket when {@code $LOCKWARDEN_SOCKET} is not set. */
  public static final String DEFAULT_SOCKET = "/run/lockwarden/lockwarden.sock";

  static final String AGENT_LOST = "agent_lost";
  private static final long FIRST_BACKOFF_MS = 50;
  private static final long MAX_BACKOFF_MS = 500;
  private static final long MIN_HELD_EVERY_MS = 100;
  private static final long DEFAULT_TTL_MS = 30_000; // the agent's, for a lock acquired without
  private static final long HELD_WAIT_MS = 5_000;

  /** The connection now: replaced by the keeper when it connects again to resume. */
  volatile Connection connection;
  private final Path path;
  private final int serial;
  private final ExecutorService listeners; // one thread: the lost and leader listeners

  // The keeper thread reads held while connected and resumes the locks once the connection
  // ended; it starts with the first renewed lock or the first unexpected end.
  private final Object mu = new Object(); // guards what follows
  private volatile boolean ended; // closed, or the connection ended with nothing to resume
  private boolean down; // the connection ended and no other one is up yet
  private final Set<Lock> toResume = new LinkedHashSet<>(); // held, not on any live connection
  private long retryAt; // System.nanoTime() of the next attempt (connect or resume)
  private long backoffMs = FIRST_BACKOFF_MS;
  private long heldAt; // when the last held was sent
  private Thread keeper;

  private Client(Path path) {
    this.path = path;
    int n = serial = Connection.SERIAL.incrementAndGet();
    listeners = Executors.newSingleThreadExecutor(
        r -> Connection.daemon(r, "lockwarden-listeners-" + n));
  }

  /**
   * {@code $LOCKWARDEN_SOCKET} if set and not empty, else {@link #DEFAULT_SOCKET}.
   *
   * @return the socket path clients use by default
   */
  public static Path defaultSocketPath() {
    String env = System.getenv("LOCKWARDEN_SOCKET");
    return Path.of(env != null && !env.isEmpty() ? env : DEFAULT_SOCKET);
  }

  /**
   * Connects to the agent at {@link #defaultSocketPath()}.
   *
   * @return the connected client
   * @throws IOException if the socket cannot be connected to
   */
  public static Client connect() throws IOException {
    return connect(defaultSocketPath());
  }

  /**
   * Connects to the agent at {@code socket}.
   *
   * @param socket the agent's socket path
   * @return the connected client
   * @throws IOException if the socket cannot be connected to
   */
  public static Client connect(Path socket) throws IOException {
    Client client = new Client(Objects.requireNonNull(socket, "socket"));
    Connection c = Connection.open(socket, client);
    client.connection = c;
    c.start();
    return client;
  }

  /**
   * The socket this client connected to.
   *
   * @return the socket path
   */
  public Path socketPath() {
    return path;
  }

  /**
   * Whether the client has ended: closed, or its connection ended while it held no lock to
   * resume (or once none of them could be resumed). While it connects again to resume its
   * locks it is not closed, though requests fail with {@link ErrorCode#DISCONNECTED}.
   *
   * @return true once no request can be sent any more
   */
  public boolean isClosed() {
    return ended;
  }

  /**
   * Closes the connection: the agent releases every lock of this client (detached leases
   * excepted). Requests still waiting fail with {@link ErrorCode#DISCONNECTED}, and the locks
   * are marked lost with reason {@code disconnected}. Stops resuming locks, if the client was
   * reconnecting. Later calls do nothing.
   */
  @Override
  public void close() {
    Connection c;
    List<Lock> dropped;
    synchronized (mu) {
      ended = true;
      c = connection;
      dropped = new ArrayList<>(toResume);
      toResume.clear();
      mu.notifyAll();
    }
    for (Lock l : dropped) l.markLost(ErrorCode.DISCONNECTED.wireName());
    c.close();
    listeners.shutdown(); // what is queued still runs
  }

  // --- locks --------------------------------------------------------------------------------

  /**
   * Takes the exclusive lock on {@code resource} with the agent's defaults (one attempt).
   *
   * @param resource 1 to 256 bytes of UTF-8, no control characters
   * @return the lock
   * @throws LockException {@code timeout} (someone else holds it), {@code no_quorum}...
   */
  public Lock acquire(String resource) throws LockException {
    return acquire(resource, AcquireOptions.defaults());
  }

  /**
   * Takes a hold on {@code resource}: exclusive, shared, a semaphore's permit or a detached
   * lease, as the options say.
   *
   * @param resource 1 to 256 bytes of UTF-8, no control characters
   * @param options ttl, wait, renew, fence, permits, shared, detach
   * @return the lock
   * @throws LockException {@link ErrorCode#TIMEOUT} (someone else held it for all of the
   *     wait), {@link ErrorCode#NO_QUORUM} (masters unavailable), {@link
   *     ErrorCode#KIND_MISMATCH}, {@link ErrorCode#BAD_REQUEST}, {@link ErrorCode#FORBIDDEN}...
   */
  public Lock acquire(String resource, AcquireOptions options) throws LockException {
    return connection.await(sendAcquire(resource, options));
  }

  /**
   * {@link #acquire(String, AcquireOptions)} without blocking. Cancelling the future stops the
   * wait; a lock granted after that is released by the client.
   *
   * @param resource the resource
   * @param options the options
   * @return the lock, or the failure as in {@link #acquire(String, AcquireOptions)}
   */
  public CompletableFuture<Lock> acquireAsync(String resource, AcquireOptions options) {
    return connection.async(sendAcquire(resource, options));
  }

  /**
   * Releases the hold of {@code token} on {@code resource}: one of this client's, or a
   * detached lease from any client of the same uid.
   *
   * @param resource the resource
   * @param token the grant's token
   * @throws LockException {@link ErrorCode#NOT_HELD} (no such hold now), {@link
   *     ErrorCode#FORBIDDEN} (another uid's lease)...
   */
  public void release(String resource, String token) throws LockException {
    connection.await(sendRelease(resource, token));
  }

  /**
   * {@link #release(String, String)} without blocking.
   *
   * @param resource the resource
   * @param token the grant's token
   * @return completes once released
   */
  public CompletableFuture<Void> releaseAsync(String resource, String token) {
    return connection.async(sendRelease(resource, token));
  }

  /**
   * Resets the time to live of the hold of {@code token} (as {@link #release(String, String)})
   * to {@code ttl} from now.
   *
   * @param resource the resource
   * @param token the grant's token
   * @param ttl the new time to live (whole milliseconds); null for the agent's default
   * @return the new validity
   * @throws LockException {@link ErrorCode#NOT_HELD}, {@link ErrorCode#NO_QUORUM}...
   */
  public Duration extend(String resource, String token, Duration ttl) throws LockException {
    return connection.await(sendExtend(resource, token, ttl));
  }

  /**
   * {@link #extend(String, String, Duration)} without blocking.
   *
   * @param resource the resource
   * @param token the grant's token
   * @param ttl the new time to live; null for the agent's default
   * @return the new validity
   */
  public CompletableFuture<Duration> extendAsync(String resource, String token, Duration ttl) {
    return connection.async(sendExtend(resource, token, ttl));
  }

  // --- elections ----------------------------------------------------------------------------

  /**
   * Waits to lead the election {@code name} with the agent's defaults (a wait of its {@code
   * max_wait_ms}).
   *
   * @param name the election's name
   * @param value what the leader announces, e.g. {@code host-a:8080}
   * @return the leadership
   * @throws LockException as {@link #campaign(String, String, CampaignOptions)}
   */
  public Leadership campaign(String name, String value) throws LockException {
    return campaign(name, value, CampaignOptions.defaults());
  }

  /**
   * Waits to lead the election {@code name}, announcing {@code value}; the leadership lasts
   * while this client is connected.
   *
   * @param name the election's name: 1 to 256 bytes of UTF-8, no control characters
   * @param value what the leader announces: 1 to 1024 bytes of UTF-8, no control characters
   * @param options ttl and wait
   * @return the leadership
   * @throws LockException {@link ErrorCode#TIMEOUT} (another led for all of the wait), {@link
   *     ErrorCode#NO_QUORUM}, {@link ErrorCode#KIND_MISMATCH}, {@link ErrorCode#FORBIDDEN}...
   */
  public Leadership campaign(String name, String value, CampaignOptions options)
      throws LockException {
    return connection.await(sendCampaign(name, value, options));
  }

  /**
   * {@link #campaign(String, String, CampaignOptions)} without blocking. Cancelling the future
   * stops the wait; a leadership won after that is resigned by the client.
   *
   * @param name the election's name
   * @param value what the leader announces
   * @param options ttl and wait
   * @return the leadership
   */
  public CompletableFuture<Leadership> campaignAsync(String name, String value,
      CampaignOptions options) {
    return connection.async(sendCampaign(name, value, options));
  }

  /**
   * Stops leading {@code name}.
   *
   * @param name the election's name
   * @param token the leadership's token
   * @throws LockException {@link ErrorCode#NOT_HELD} ({@code token} does not lead it on this
   *     connection now), {@link ErrorCode#KIND_MISMATCH} (the token holds a lock)...
   */
  public void resign(String name, String token) throws LockException {
    connection.await(sendResign(name, token));
  }

  /**
   * {@link #resign(String, String)} without blocking.
   *
   * @param name the election's name
   * @param token the leadership's token
   * @return completes once resigned
   */
  public CompletableFuture<Void> resignAsync(String name, String token) {
    return connection.async(sendResign(name, token));
  }

  /**
   * Who leads {@code name} now, read from the masters through any agent.
   *
   * @param name the election's name
   * @return the leader, or empty if nobody leads
   * @throws LockException {@link ErrorCode#NO_QUORUM} (the read could not tell: ask again)...
   */
  public Optional<Leader> leader(String name) throws LockException {
    return connection.await(sendLeader(name));
  }

  /**
   * {@link #leader(String)} without blocking.
   *
   * @param name the election's name
   * @return the leader, or empty if nobody leads
   */
  public CompletableFuture<Optional<Leader>> leaderAsync(String name) {
    return connection.async(sendLeader(name));
  }

  /**
   * Follows the election {@code name}: the observation holds the leader now and receives every
   * change. Observing a name again starts over (the earlier observation ends).
   *
   * @param name the election's name
   * @return the observation
   * @throws LockException {@link ErrorCode#NO_QUORUM} (the first read could not tell), {@link
   *     ErrorCode#TOO_MANY}...
   */
  public Observation observe(String name) throws LockException {
    return connection.await(sendObserve(name));
  }

  /**
   * {@link #observe(String)} without blocking. Cancelling the future stops the wait; an
   * observation started after that is stopped by the client.
   *
   * @param name the election's name
   * @return the observation
   */
  public CompletableFuture<Observation> observeAsync(String name) {
    return connection.async(sendObserve(name));
  }

  /**
   * Stops the events of {@code name}; its observation ends (events before it can still be
   * taken).
   *
   * @param name the election's name
   * @throws LockException {@link ErrorCode#NOT_HELD} (this client does not observe it)...
   */
  public void unobserve(String name) throws LockException {
    connection.await(sendUnobserve(name, true));
  }

  /**
   * {@link #unobserve(String)} without blocking.
   *
   * @param name the election's name
   * @return completes once the events stopped
   */
  public CompletableFuture<Void> unobserveAsync(String name) {
    return connection.async(sendUnobserve(name, true));
  }

  // --- the rest -----------------------------------------------------------------------------

  /**
   * Checks that the agent is alive and reading.
   *
   * @throws LockException {@link ErrorCode#DISCONNECTED} if the connection is gone...
   */
  public void ping() throws LockException {
    connection.await(connection.send("ping", Map.of(), r -> null));
  }

  /**
   * {@link #ping()} without blocking.
   *
   * @return completes when the agent answers
   */
  public CompletableFuture<Void> pingAsync() {
    return connection.async(connection.send("ping", Map.of(), r -> null));
  }

  /**
   * The locks this connection holds now, as the agent lists them ({@code resource}, {@code
   * token}, {@code validity_ms}, {@code renew}, and for a hold that is not exclusive {@code
   * mode}, {@code permits}, {@code permit}).
   *
   * @return one map per hold
   * @throws LockException as any request
   */
  public List<Map<String, Object>> held() throws LockException {
    return connection.await(connection.send("held", Map.of(), r -> Wire.objects(r, "locks")));
  }

  /**
   * The agent's view of the masters (the {@code health} reply: {@code quorum}, {@code nodes}).
   *
   * @return the reply
   * @throws LockException as any request
   */
  public Map<String, Object> health() throws LockException {
    return request("health", Map.of());
  }

  /**
   * Sends any op with the given fields and returns the whole reply. The client sets {@code id}
   * and {@code op}. A grant obtained this way is not tracked: no {@link Lock}, no {@code lost}.
   *
   * @param op the op, e.g. {@code "locks"}
   * @param fields the op's fields: strings, booleans, integers, and maps and lists of them
   * @return the reply: {@code Map}, {@code List}, {@code String}, {@code Long}, {@code Double},
   *     {@code Boolean} or null values
   * @throws LockException the agent's error
   */
  public Map<String, Object> request(String op, Map<String, ?> fields) throws LockException {
    return connection.await(connection.send(op, fields, r -> r));
  }

  /**
   * {@link #request(String, Map)} without blocking.
   *
   * @param op the op
   * @param fields the op's fields
   * @return the reply
   */
  public CompletableFuture<Map<String, Object>> requestAsync(String op, Map<String, ?> fields) {
    return connection.async(connection.send(op, fields, r -> r));
  }

  @Override
  public String toString() {
    return "Client{" + connection.path + (isClosed() ? ", closed" : "") + "}";
  }

  // --- requests -----------------------------------------------------------------------------

  private Connection.Pending<Lock> sendAcquire(String resource, AcquireOptions options) {
    Connection c = connection;
    long sent = System.nanoTime(); // the validity counts from here
    return c.send("acquire", options.fields(resource), reply -> {
      Lock lock = new Lock(this, Wire.string(reply, "resource"), reply, options, sent);
      if (!lock.isDetached()) { // no lost comes for a lease, nor does close end it
        c.register(lock);
        if (lock.renews()) renewedLockAdded();
      }
      return lock;
    });
  }

  Connection.Pending<Void> sendRelease(String resource, String token) {
    return connection.send("release", tokenFields("resource", resource, token), r -> null);
  }

  private Connection.Pending<Duration> sendExtend(String resource, String token, Duration ttl) {
    Map<String, Object> f = tokenFields("resource", resource, token);
    if (ttl != null) f.put("ttl_ms", ttl.toMillis());
    Connection c = connection;
    long sent = System.nanoTime();
    return c.send("extend", f, r -> {
      Duration validity = Wire.millis(r, "validity_ms");
      Lock lock = c.lock(token);
      if (lock != null && lock.resource().equals(resource)) lock.extended(ttl, sent, validity);
      return validity;
    });
  }

  private Connection.Pending<Leadership> sendCampaign(String name, String value,
      CampaignOptions options) {
    Connection c = connection;
    return c.send("campaign", options.fields(name, value), reply -> {
      Leadership l = new Leadership(this, reply);
      c.register(l);
      return l;
    });
  }

  Connection.Pending<Void> sendResign(String name, String token) {
    return connection.send("resign", tokenFields("name", name, token), r -> null);
  }

  private Connection.Pending<Optional<Leader>> sendLeader(String name) {
    return connection.send("leader", nameField(name), Wire::leader);
  }

  private Connection.Pending<Observation> sendObserve(String name) {
    Connection c = connection;
    return c.send("observe", nameField(name), reply -> {
      Observation o = new Observation(this, reply);
      Observation replaced = c.register(o);
      if (replaced != null) replaced.end(ErrorCode.NOT_HELD, "observed again");
      return o;
    });
  }

  /** An unobserve; {@code track}: its reply ends the observation of the name. */
  Connection.Pending<Void> sendUnobserve(String name, boolean track) {
    Connection c = connection;
    return c.send("unobserve", nameField(name), r -> {
      if (track) {
        Observation o = c.forget(name, null);
        if (o != null) o.end(ErrorCode.NOT_HELD, "unobserved");
      }
      return null;
    });
  }

  void sendUnobserve(String name) {
    sendUnobserve(name, false);
  }

  // --- listeners, and the keeper: held while connected, resume after an unexpected end ------

  /** Runs a listener on the listener thread (inline once the client has ended). */
  void runListener(Runnable listener) {
    Runnable guarded = () -> {
      try {
        listener.run();
      } catch (RuntimeException | Error e) { // a listener's failure is its own, not ours
        Thread t = Thread.currentThread();
        t.getUncaughtExceptionHandler().uncaughtException(t, e);
      }
    };
    try {
      listeners.execute(guarded);
    } catch (RejectedExecutionException e) {
      guarded.run();
    }
  }

  /**
   * Called by {@code c}'s reader when {@code c} ended without {@link #close()}, with the locks
   * it held: takes those to resume, returns the others (to be marked lost, as before).
   */
  List<Lock> connectionEnded(Connection c, List<Lock> locks) {
    List<Lock> rest = new ArrayList<>();
    synchronized (mu) {
      if (ended || c != connection) return locks;
      boolean first = toResume.isEmpty();
      for (Lock l : locks) {
        if (l.resumable()) {
          toResume.add(l);
        } else {
          rest.add(l);
        }
      }
      if (toResume.isEmpty()) {
        ended = true; // nothing to resume: the client ends, as it always did
        mu.notifyAll(); // (a keeper stops)
        return rest;
      }
      down = true;
      if (first) {
        backoffMs = FIRST_BACKOFF_MS;
        retryAt = System.nanoTime();
      }
      startKeeper();
      mu.notifyAll();
    }
    return rest;
  }

  /** Called by a connection's reader once it has ended and settled everything. */
  void connectionDone() {
    if (ended) listeners.shutdown(); // what is queued still runs
  }

  /** A renewed lock is held now: the keeper reads held for it. */
  private void renewedLockAdded() {
    synchronized (mu) {
      if (ended) return;
      startKeeper();
      mu.notifyAll();
    }
  }

  private void startKeeper() { // under mu
    if (keeper != null) return;
    heldAt = System.nanoTime(); // the first held one interval on: the grant's validity holds
    keeper = Connection.daemon(this::keep, "lockwarden-keeper-" + serial);
    keeper.start();
  }

  private enum Step { WAIT, CONNECT, RESUME, HELD }

  /** The keeper thread's loop: one step at a time until the client ends. */
  private void keep() {
    for (;;) {
      List<Lock> overdue = new ArrayList<>();
      Step step = Step.WAIT;
      boolean finish = false;
      Connection c;
      synchronized (mu) {
        if (ended) return;
        c = connection;
        long now = System.nanoTime();
        long next = now + TimeUnit.HOURS.toNanos(1);
        for (Iterator<Lock> it = toResume.iterator(); it.hasNext();) {
          Lock l = it.next();
          if (!l.resumable()) {
            it.remove(); // ended by its user meanwhile (a release failed: disconnected)
          } else if (now - l.validUntil() >= 0) {
            it.remove(); // its validity ran out before it could be resumed
            overdue.add(l);
          } else {
            next = earlier(next, l.validUntil());
          }
        }
        if (down && toResume.isEmpty()) {
          ended = true; // nothing left to resume: the client ends
          finish = true;
        } else if (down) {
          if (now - retryAt >= 0) step = Step.CONNECT;
          next = earlier(next, retryAt);
        } else {
          if (!toResume.isEmpty()) {
            if (now - retryAt >= 0) step = Step.RESUME;
            next = earlier(next, retryAt);
          }
          long every = heldEvery(c);
          if (step == Step.WAIT && every > 0) {
            if (now - (heldAt + every) >= 0) {
              step = Step.HELD;
              heldAt = now;
            }
            next = earlier(next, heldAt + every);
          }
        }
        if (step == Step.WAIT && !finish && overdue.isEmpty()) {
          long ms = Math.max(1, TimeUnit.NANOSECONDS.toMillis(next - now + 999_999));
          try {
            mu.wait(ms);
          } catch (InterruptedException e) {
            return; // nobody interrupts the keeper
          }
          continue;
        }
      }
      for (Lock l : overdue) l.markLost(AGENT_LOST);
      if (finish) {
        listeners.shutdown();
        return;
      }
      switch (step) {
        case CONNECT:
          reconnect();
          break;
        case RESUME:
          resume(c);
          break;
        case HELD:
          readHeld(c);
          break;
        default:
          break;
      }
    }
  }

  private static long earlier(long a, long b) {
    return b - a < 0 ? b : a;
  }

  /** How often to read held on {@code c}: a third of its renewed locks' smallest ttl; 0: never. */
  private static long heldEvery(Connection c) {
    long least = 0;
    for (Lock l : c.locks()) {
      if (!l.renews() || !l.resumable()) continue;
      Duration ttl = l.ttlAsked();
      long ms = ttl == null ? DEFAULT_TTL_MS : ttl.toMillis();
      least = least == 0 ? ms : Math.min(least, ms);
    }
    if (least == 0) return 0;
    return TimeUnit.MILLISECONDS.toNanos(Math.max(MIN_HELD_EVERY_MS, least / 3));
  }

  /** The next attempt after {@code backoffMs}, which doubles up to its cap. */
  private void backOff() { // under mu
    retryAt = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(backoffMs);
    backoffMs = Math.min(backoffMs * 2, MAX_BACKOFF_MS);
  }

  /** Connects to the socket again; the new connection becomes the client's. */
  private void reconnect() {
    Connection fresh;
    try {
      fresh = Connection.open(path, this);
    } catch (IOException | RuntimeException e) {
      synchronized (mu) {
        backOff(); // not up yet
      }
      return;
    }
    boolean use;
    synchronized (mu) {
      use = !ended;
      if (use) {
        connection = fresh;
        down = false;
        retryAt = System.nanoTime(); // resume at once
        heldAt = retryAt;
      }
    }
    if (use) {
      fresh.start();
    } else {
      fresh.close();
    }
  }

  /**
   * Sends a resume for each lock still to resume, and waits for the replies, each at most
   * until its lock's validity runs out.
   */
  private void resume(Connection c) {
    List<Lock> batch;
    synchronized (mu) {
      batch = new ArrayList<>(toResume);
    }
    batch.removeIf(l -> !l.resumable()); // ended by its user meanwhile
    batch.sort((a, b) -> Long.signum(a.validUntil() - b.validUntil())); // wait in that order
    List<Connection.Pending<Void>> sent = new ArrayList<>();
    for (Lock l : batch) {
      long at = System.nanoTime();
      sent.add(c.send("resume", l.resumeFields(), reply -> {
        resumed(c, l, Wire.millis(reply, "validity_ms"), at);
        return null;
      }));
    }
    for (int i = 0; i < batch.size(); i++) {
      Lock l = batch.get(i);
      Connection.Pending<Void> p = sent.get(i);
      try {
        p.result.get(Math.max(0, l.validUntil() - System.nanoTime()), TimeUnit.NANOSECONDS);
      } catch (TimeoutException e) {
        giveUp(l); // its validity ran out first (a late grant is given back)
      } catch (ExecutionException e) {
        ErrorCode code = e.getCause() instanceof LockException
            ? ((LockException) e.getCause()).code() : ErrorCode.UNKNOWN;
        switch (code) {
          case NOT_HELD: // a quorum does not hold it any more
          case FORBIDDEN:
          case KIND_MISMATCH:
          case BAD_REQUEST: // will never work
            giveUp(l);
            break;
          default: // no_quorum, shutting_down, too_many, disconnected...: try again
            break;
        }
      } catch (InterruptedException e) {
        return; // nobody interrupts the keeper
      }
    }
    synchronized (mu) {
      if (!toResume.isEmpty()) backOff();
    }
  }

  /** On {@code c}'s reader: a resume sent at {@code at} answered ok with {@code validity}. */
  private void resumed(Connection c, Lock l, Duration validity, long at) {
    boolean kept;
    synchronized (mu) {
      kept = toResume.remove(l) && l.resumed(validity, at);
      if (kept) c.register(l); // before the next line: a lost event for it is heard
    }
    if (!kept) { // reported lost (or ended by its user) meanwhile: nobody holds it
      c.send("release", tokenFields("resource", l.resource(), l.token()), r -> null);
    }
  }

  /** {@code l} cannot be resumed: lost, unless it was settled already. */
  private void giveUp(Lock l) {
    boolean mine;
    synchronized (mu) {
      mine = toResume.remove(l);
    }
    if (mine) l.markLost(AGENT_LOST);
  }

  /** Reads held on {@code c}: each renewed lock is valid until then plus its validity_ms. */
  private void readHeld(Connection c) {
    long at = System.nanoTime();
    Connection.Pending<List<Map<String, Object>>> p =
        c.send("held", Map.of(), r -> Wire.objects(r, "locks"));
    List<Map<String, Object>> held;
    try {
      held = p.result.get(HELD_WAIT_MS, TimeUnit.MILLISECONDS);
    } catch (TimeoutException e) {
      p.result.completeExceptionally(new CancellationException("abandoned"));
      return;
    } catch (ExecutionException | InterruptedException e) {
      return; // the connection ended: connectionEnded has it
    }
    for (Map<String, Object> entry : held) {
      Object token = entry.get("token");
      Object validity = entry.get("validity_ms");
      if (!(token instanceof String) || !(validity instanceof Long)) continue;
      Lock l = c.lock((String) token);
      if (l != null) l.validFor(at, Duration.ofMillis((Long) validity));
    }
  }

  private static Map<String, Object> tokenFields(String key, String name, String token) {
    Map<String, Object> f = new LinkedHashMap<>();
    f.put(key, Objects.requireNonNull(name, key));
    f.put("token", Objects.requireNonNull(token, "token"));
    return f;
  }

  private static Map<String, Object> nameField(String name) {
    return Map.of("name", Objects.requireNonNull(name, "name"));
  }
}
