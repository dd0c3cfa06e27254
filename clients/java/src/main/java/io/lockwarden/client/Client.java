package io.lockwarden.client;

import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;

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

  /** The connection now: replaced by the keeper when it connects again to resume. */
  volatile Connection connection;
  private final Path path;
  final ExecutorService listeners; // one thread: the lost and leader listeners
  private final Keeper keeper; // held while connected, resume after an unexpected end

  private Client(Path path) {
    this.path = path;
    int n = Connection.SERIAL.incrementAndGet();
    listeners = Executors.newSingleThreadExecutor(
        r -> Connection.daemon(r, "lockwarden-listeners-" + n));
    keeper = new Keeper(this, n);
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
   * @throws IOException if the socket cannot be connected to: an {@link
   *     AgentUnreachableException}, naming the socket
   */
  public static Client connect() throws IOException {
    return connect(defaultSocketPath());
  }

  /**
   * Connects to the agent at {@code socket}.
   *
   * @param socket the agent's socket path
   * @return the connected client
   * @throws IOException if the socket cannot be connected to: an {@link
   *     AgentUnreachableException}, naming the socket
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
    return keeper.ended();
  }

  /**
   * Closes the connection: the agent releases every lock of this client (detached leases
   * excepted). Requests still waiting fail with {@link ErrorCode#DISCONNECTED}, and the locks
   * are marked lost with reason {@code disconnected}. Stops resuming locks, if the client was
   * reconnecting. Later calls do nothing.
   */
  @Override
  public void close() {
    Connection c = keeper.close(); // stops resuming
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
   * Takes every one of {@code resources} (2 to 16, distinct), all or none, within the options'
   * wait: the agent takes them in one canonical order, so two such acquires never wait for each
   * other in a cycle. The options apply to each (not detach or reentrant).
   *
   * @param resources the resources
   * @param options ttl, wait, renew, fence, permits, shared
   * @return the locks, held together
   * @throws LockException as {@link #acquire(String, AcquireOptions)}, the message naming the
   *     resource that could not be taken (none is held then)
   */
  public LockSet acquireAll(List<String> resources, AcquireOptions options) throws LockException {
    Connection c = connection;
    long sent = System.nanoTime();
    long owner = options.owner() != 0 ? options.owner() : Thread.currentThread().getId();
    Map<String, Object> f = options.fields("", owner);
    f.remove("resource");
    f.put("resources", List.copyOf(resources));
    return connection.await(c.send("acquire", f, reply -> {
      List<Lock> locks = new ArrayList<>();
      for (Map<String, Object> grant : Wire.objects(reply, "resources")) {
        Lock lock = new Lock(this, Wire.string(grant, "resource"), grant, options, sent, owner);
        c.register(lock);
        if (lock.renews()) keeper.renewedLockAdded();
        locks.add(lock);
      }
      return new LockSet(locks);
    }));
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
    long owner = options.owner() != 0 ? options.owner() : Thread.currentThread().getId();
    return c.send("acquire", options.fields(resource, owner), reply -> {
      Lock again = options.reentrant() ? c.lock(Wire.string(reply, "token")) : null;
      if (again != null) { // a reentrant hold taken again: the same lock, one more deep
        again.reentered(reply, sent);
        return again;
      }
      Lock lock = new Lock(this, Wire.string(reply, "resource"), reply, options, sent, owner);
      if (!lock.isDetached()) { // no lost comes for a lease, nor does close end it
        c.register(lock);
        if (lock.renews()) keeper.renewedLockAdded();
      }
      return lock;
    });
  }

  Connection.Pending<Void> sendRelease(String resource, String token) {
    Connection c = connection;
    return c.send("release", tokenFields("resource", resource, token), r -> {
      Long left = Wire.optionalInteger(r, "depth");
      Lock lock = left == null ? null : c.lock(token);
      if (lock != null) lock.unwound(Math.toIntExact(left)); // a reentrant hold, still held
      return null;
    });
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
    long sent = System.nanoTime();
    return c.send("campaign", options.fields(name, value), reply -> {
      Leadership l = new Leadership(this, reply, options, sent);
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

  // --- listeners, and the connection's end (the keeper has the rest) ------------------------

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
   * it held: the keeper takes those to resume, returns the others (to be marked lost).
   */
  List<Lock> connectionEnded(Connection c, List<Lock> locks) {
    return keeper.connectionEnded(c, locks);
  }

  /** Called by a connection's reader once it has ended and settled everything. */
  void connectionDone() {
    keeper.connectionDone();
  }

  static Map<String, Object> tokenFields(String key, String name, String token) {
    Map<String, Object> f = new LinkedHashMap<>();
    f.put(key, Objects.requireNonNull(name, key));
    f.put("token", Objects.requireNonNull(token, "token"));
    return f;
  }

  private static Map<String, Object> nameField(String name) {
    return Map.of("name", Objects.requireNonNull(name, "name"));
  }
}
