package io.lockwarden.client;

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.OptionalLong;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * A granted hold: a mutex, a read or write hold, a semaphore's permit, or a detached lease (a
 * {@link Leadership} for an election). It belongs to the {@link Client} that acquired it, and
 * ends when released, when the client closes, or when it is lost.
 *
 * <p><b>Lost.</b> When the agent pushes {@code lost} for it (its renewal could not reach a
 * quorum, it expired without being extended, an operator revoked it) or the client closes,
 * {@link #isLost()} turns true, {@link #lostReason()} says why ({@code renew_failed}, {@code
 * expired}, {@code revoked}, {@code disconnected}, {@code agent_lost}) and the {@link #onLost}
 * listeners run. Stop the work the lock protected at once: someone else may hold it now. A
 * {@link #release()} that the agent answers {@code not_held} (the lock had ended) marks it lost
 * the same way, with reason {@code not_held} unless the agent's {@code lost} event came first.
 *
 * <p><b>When the agent restarts.</b> If the connection ends without the client being closed, a
 * held lock is not lost at once: the client reconnects and resumes it through the agent's next
 * run ({@link Client} has the details). It is lost with reason {@code agent_lost} if the agent
 * answers that it is gone, or if its last known validity runs out first. A {@link Leadership}
 * and a detached lease are never resumed.
 *
 * <p><b>Closing.</b> {@link #close()} releases it, so try-with-resources scopes a hold; if the
 * lock was lost before the end of the block, {@code close()} throws {@link ErrorCode#LOST} so
 * that the loss is not silent.
 *
 * <p>Thread-safe.
 */
public sealed class Lock implements AutoCloseable permits Leadership {
  /** RELEASING: a release is on the wire; its reply settles the state (HELD again on failure). */
  private enum State { HELD, RELEASING, RELEASED, LOST }

  final Client client;
  private final String resource;
  private final String token;
  private final Duration waited;
  private final Long fence;
  private final Mode mode;
  private final Integer permit;
  private final boolean detached;
  private final boolean renew; // as acquired, for a resume
  private final int permits; // as acquired (0: not a semaphore), for a resume
  private final CountDownLatch lostLatch = new CountDownLatch(1);

  private volatile Duration validity;
  private volatile Duration ttl; // as acquired or last extended; null: the agent's default
  private volatile long validUntil; // System.nanoTime() until which the lock is known valid
  private final Object mu = new Object(); // guards the fields below
  private State state = State.HELD;
  private String lostReason;
  private boolean closed;
  private CompletableFuture<Void> releasing; // while RELEASING: settled once its reply came
  private int depth = 1; // acquires of a reentrant hold not yet released
  private boolean unwound; // the release on the wire left a reentrant hold held
  private long owner; // as acquired (0: none sent), for a resume
  private final List<Consumer<? super Lock>> listeners = new ArrayList<>();

  /**
   * A grant: {@code reply} answered a request sent at {@code sentAt} (System.nanoTime()) with
   * {@code options}.
   */
  Lock(Client client, String resource, Map<String, Object> reply, AcquireOptions options,
      long sentAt, long owner) throws Wire.ProtocolException {
    this(client, resource, reply, sentAt, options == null ? null : options.ttl(),
        options != null && options.renew(), options == null ? 0 : options.permits(),
        options != null && options.detach());
    this.owner = owner;
  }

  /** A grant asked with ttl (null: the agent's default), renew, permits and detached. */
  Lock(Client client, String resource, Map<String, Object> reply, long sentAt, Duration ttl,
      boolean renew, int permits, boolean detached) throws Wire.ProtocolException {
    this.client = client;
    this.resource = resource;
    this.token = Wire.string(reply, "token");
    this.validity = Wire.millis(reply, "validity_ms");
    this.validUntil = sentAt + validity.toNanos();
    this.ttl = ttl;
    this.renew = renew;
    this.permits = permits;
    this.waited = Wire.millis(reply, "waited_ms");
    this.fence = Wire.optionalInteger(reply, "fence");
    this.mode = reply.containsKey("mode") ? modeOf(Wire.string(reply, "mode")) : Mode.EXCLUSIVE;
    Long p = Wire.optionalInteger(reply, "permit");
    this.permit = p == null ? null : Math.toIntExact(p);
    this.detached = detached;
  }

  private static Mode modeOf(String wire) throws Wire.ProtocolException {
    try {
      return Mode.fromWire(wire);
    } catch (IllegalArgumentException e) {
      throw new Wire.ProtocolException(e.getMessage());
    }
  }

  /**
   * The resource held (for a {@link Leadership}, the election's name).
   *
   * @return the resource name
   */
  public String resource() {
    return resource;
  }

  /**
   * The grant's token (40 hex characters): what {@code release} and {@code extend} name.
   *
   * @return the token
   */
  public String token() {
    return token;
  }

  /**
   * How long the lock was guaranteed when the agent answered the acquire, the last {@link
   * #extend}, or the last resume: finish the protected work within it, extend, or use renew.
   *
   * @return the latest validity the agent reported
   */
  public Duration validity() {
    return validity;
  }

  /**
   * How long the acquire waited for another holder.
   *
   * @return the wait
   */
  public Duration waited() {
    return waited;
  }

  /**
   * The fencing token, when the acquire asked for one ({@link AcquireOptions.Builder#fence}):
   * it strictly increases across successive grants of the resource.
   *
   * @return the fence, or empty
   */
  public OptionalLong fence() {
    return fence == null ? OptionalLong.empty() : OptionalLong.of(fence);
  }

  /**
   * The kind of hold.
   *
   * @return exclusive, shared or permit
   */
  public Mode mode() {
    return mode;
  }

  /**
   * For a semaphore's permit, which one (0 to permits - 1).
   *
   * @return the permit, or empty for any other hold
   */
  public OptionalInt permit() {
    return permit == null ? OptionalInt.empty() : OptionalInt.of(permit);
  }

  /**
   * Whether this is a detached lease: it outlives the client, no {@code lost} comes for it,
   * and it ends at its ttl or when released by its token from any connection of this uid.
   *
   * @return true for a detached lease
   */
  public boolean isDetached() {
    return detached;
  }

  /**
   * Whether the lock ended without being released (see the class comment).
   *
   * @return true once lost
   */
  public boolean isLost() {
    synchronized (mu) {
      return state == State.LOST;
    }
  }

  /**
   * Why the lock was lost: {@code renew_failed}, {@code expired}, {@code revoked} (from the
   * agent), {@code disconnected} (the client was closed, or the connection ended while it was
   * being released), {@code agent_lost} (the connection ended and the lock could not be resumed
   * through the agent's next run within its validity) or {@code not_held} (a release found it
   * gone).
   *
   * @return the reason, or empty while the lock is not lost
   */
  public Optional<String> lostReason() {
    synchronized (mu) {
      return Optional.ofNullable(lostReason);
    }
  }

  /**
   * Adds a listener called once if the lock is lost, on the client's listener thread (one
   * listener at a time, in the order events came); at once (on that thread) if it is lost
   * already. It may call the client's blocking methods.
   *
   * @param listener called with this lock
   * @return this lock
   */
  public Lock onLost(Consumer<? super Lock> listener) {
    boolean now;
    synchronized (mu) {
      now = state == State.LOST;
      if (!now) listeners.add(listener);
    }
    if (now) client.runListener(() -> listener.accept(this));
    return this;
  }

  /**
   * Blocks until the lock is lost or the timeout passes.
   *
   * @param timeout the longest wait
   * @return the reason it was lost, or empty if it was not lost within the timeout
   * @throws LockException {@link ErrorCode#INTERRUPTED} if the thread was interrupted
   */
  public Optional<String> awaitLost(Duration timeout) throws LockException {
    try {
      lostLatch.await(Observation.nanos(timeout), TimeUnit.NANOSECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new LockException(ErrorCode.INTERRUPTED, "interrupted while waiting for a loss");
    }
    return lostReason();
  }

  /**
   * Throws if the lock was lost: call it between steps of the protected work.
   *
   * @throws LockException {@link ErrorCode#LOST} once the lock is lost
   */
  public void check() throws LockException {
    Optional<String> reason = lostReason();
    if (reason.isPresent()) throw lostError(reason.get());
  }

  /**
   * Resets the lock's time to live to {@code ttl} from now, provided it still holds.
   *
   * @param ttl the new time to live (whole milliseconds)
   * @return the new validity
   * @throws LockException {@link ErrorCode#LOST} if it was lost; the agent's {@code not_held}
   *     (stop the work), {@code no_quorum} (assume it ends when its last validity runs out)...
   */
  public Duration extend(Duration ttl) throws LockException {
    check();
    Duration v = client.extend(resource, token, ttl);
    validity = v; // (a lock of this client's connection had it set by the reply already)
    return v;
  }

  /**
   * {@link #extend} without waiting.
   *
   * @param ttl the new time to live
   * @return the new validity, or the failure as in {@link #extend}
   */
  public CompletableFuture<Duration> extendAsync(Duration ttl) {
    Optional<String> reason = lostReason();
    if (reason.isPresent()) return CompletableFuture.failedFuture(lostError(reason.get()));
    return client.extendAsync(resource, token, ttl).thenApply(v -> {
      validity = v;
      return v;
    });
  }

  /**
   * Gives the lock back (a leadership resigns). Does nothing if it was already released or
   * lost. While a release is on the wire (one whose caller was interrupted, or another
   * thread's), waits for its reply instead of sending another.
   *
   * <p>Interrupted, it throws {@link ErrorCode#INTERRUPTED} and the release goes on: the lock
   * is neither held nor released until the agent's reply settles it as here (released; lost;
   * held again if the release failed).
   *
   * @throws LockException the agent's error: {@code not_held} (it had ended: the lock is now
   *     lost, with reason {@code not_held} unless a {@code lost} event came first), {@code
   *     no_quorum} (it may linger on some masters until its ttl; release may be tried again),
   *     {@code disconnected} (the lock is lost); {@link ErrorCode#INTERRUPTED}
   */
  public void release() throws LockException {
    CompletableFuture<Void> outcome = startRelease();
    if (outcome == null) return;
    try {
      outcome.get();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new LockException(ErrorCode.INTERRUPTED, "interrupted while releasing \"" + resource
          + "\"; the release was sent and its reply settles the lock");
    } catch (ExecutionException e) {
      throw Connection.rethrown(e.getCause());
    }
  }

  /**
   * {@link #release} without waiting. Cancelling the future does not stop the release.
   *
   * @return completes when released, or with the failure as in {@link #release}
   */
  public CompletableFuture<Void> releaseAsync() {
    CompletableFuture<Void> outcome = startRelease();
    if (outcome == null) return CompletableFuture.completedFuture(null);
    return Connection.follow(outcome, null);
  }

  /**
   * Releases the lock, as {@link #release}; and if it was lost before, throws instead.
   * Later calls do nothing.
   *
   * @throws LockException {@link ErrorCode#LOST} if the lock was lost (or found gone: {@code
   *     not_held}, {@code disconnected}) before the close; any other failure of the release
   */
  @Override
  public void close() throws LockException {
    String reason;
    synchronized (mu) {
      if (closed || state == State.RELEASED) return;
      closed = depth <= 1; // an inner block of a reentrant hold leaves the outer one to close
      reason = lostReason;
    }
    if (reason != null) throw lostError(reason);
    try {
      release();
    } catch (LockException e) {
      if (e.code() == ErrorCode.NOT_HELD || e.code() == ErrorCode.DISCONNECTED) {
        throw lostError(lostReason().orElse(e.rawCode()));
      }
      throw e;
    }
  }

  @Override
  public String toString() {
    return getClass().getSimpleName() + "{" + resource + ", " + mode.wireName()
        + (permit != null ? " " + permit : "") + (fence != null ? ", fence " + fence : "")
        + (detached ? ", detached" : "") + stateNote() + "}";
  }

  /** For toString: nothing while held, else ", releasing", ", released" or ", lost: REASON". */
  String stateNote() {
    synchronized (mu) {
      switch (state) {
        case RELEASING: return ", releasing";
        case RELEASED: return ", released";
        case LOST: return ", lost: " + lostReason;
        default: return "";
      }
    }
  }

  /** Sends the request that ends this hold (a leadership's is resign). */
  Connection.Pending<Void> sendGiveBack() {
    return client.sendRelease(resource, token);
  }

  /** Ends a grant that nobody took (its acquire was abandoned), without waiting. */
  void giveBack() {
    synchronized (mu) {
      if (state != State.HELD) return;
      if (depth > 1) { // a reentrant acquire abandoned: its one acquire is given back
        depth--;
        client.sendRelease(resource, token);
        return;
      }
      state = State.RELEASED;
    }
    client.connection.forget(this);
    sendGiveBack(); // the outcome matters to no one: closing the client would end it too
  }

  // --- resuming (Client's keeper) -------------------------------------------------------------

  /** Whether the client resumes it when the connection ends: a held lock, not a lease. */
  boolean resumable() {
    synchronized (mu) {
      return state == State.HELD && !detached;
    }
  }

  /** Whether the agent renews it (as acquired). */
  boolean renews() {
    return renew;
  }

  /** The ttl it was acquired or last extended with; null for the agent's default. */
  Duration ttlAsked() {
    return ttl;
  }

  /** The System.nanoTime() until which the lock is known to be valid. */
  long validUntil() {
    return validUntil;
  }

  /** A reply to a request sent at {@code sentAt} said {@code validity} was left. */
  void validFor(long sentAt, Duration validity) {
    validUntil = sentAt + validity.toNanos();
  }

  /** An extend by {@code ttl}, sent at {@code sentAt}, answered {@code validity}. */
  void extended(Duration ttl, long sentAt, Duration validity) {
    this.ttl = ttl;
    this.validity = validity;
    validFor(sentAt, validity);
  }

  /** The fields of a {@code resume} of this grant (docs/protocol.md#resume). */
  Map<String, Object> resumeFields() {
    Map<String, Object> f = new LinkedHashMap<>();
    f.put("resource", resource);
    f.put("token", token);
    Duration t = ttl;
    if (t != null) f.put("ttl_ms", t.toMillis());
    if (renew) f.put("renew", true);
    if (fence != null) f.put("fence", fence);
    if (mode == Mode.PERMIT) {
      f.put("permits", permits);
      f.put("permit", permit);
    }
    if (mode == Mode.SHARED) f.put("shared", true);
    if (owner != 0) f.put("owner", owner);
    synchronized (mu) { // one that ended is resumed only to be given back, in one release
      if (depth > 1 && state == State.HELD) f.put("depth", depth);
    }
    return f;
  }

  /**
   * How many acquires the lock stands for: above 1 for a reentrant hold taken again ({@link
   * AcquireOptions.Builder#reentrant(boolean)}), less one for each release.
   *
   * @return the depth, 1 for a lock taken once
   */
  public int depth() {
    synchronized (mu) {
      return depth;
    }
  }

  /** A reentrant acquire, sent at {@code sentAt}, answered with this lock's grant again. */
  void reentered(Map<String, Object> reply, long sentAt) throws Wire.ProtocolException {
    Duration v = Wire.millis(reply, "validity_ms");
    Long d = Wire.optionalInteger(reply, "depth");
    synchronized (mu) {
      depth = d == null ? depth + 1 : Math.toIntExact(d);
    }
    validity = v;
    validFor(sentAt, v);
  }

  /** A release answered that the reentrant hold is still held, {@code left} acquires deep. */
  void unwound(int left) {
    synchronized (mu) {
      depth = left;
      if (state == State.RELEASING) unwound = true; // not a give-back's (giveBack)
    }
  }

  /**
   * A resume sent at {@code sentAt} answered ok with {@code validity}: the lock is held again,
   * unless it ended meanwhile (then false: the caller gives it back).
   */
  boolean resumed(Duration validity, long sentAt) {
    synchronized (mu) {
      if (state != State.HELD) return false;
    }
    this.validity = validity;
    validFor(sentAt, validity);
    return true;
  }

  /** Called by the reader: the agent pushed {@code lost}, or the connection ended. */
  void markLost(String reason) {
    List<Consumer<? super Lock>> toCall;
    synchronized (mu) {
      if (state != State.HELD && state != State.RELEASING) return;
      state = State.LOST;
      lostReason = reason;
      toCall = new ArrayList<>(listeners);
      listeners.clear();
    }
    lostLatch.countDown();
    for (Consumer<? super Lock> l : toCall) client.runListener(() -> l.accept(this));
  }

  /**
   * Sends the release, or joins the one on the wire. Returns its outcome, completed once the
   * reply has settled the state; null if the lock is released or lost already.
   */
  private CompletableFuture<Void> startRelease() {
    CompletableFuture<Void> outcome;
    synchronized (mu) {
      if (state == State.RELEASING) return releasing;
      if (state != State.HELD) return null;
      state = State.RELEASING;
      outcome = releasing = new CompletableFuture<>();
    }
    // Nobody abandons this request: its reply, read by the reader, always settles the lock.
    sendGiveBack().result.whenComplete((v, error) -> {
      settle(error instanceof CompletionException ? error.getCause() : error);
      if (error == null) {
        outcome.complete(null);
      } else {
        outcome.completeExceptionally(error);
      }
    });
    return outcome;
  }

  /** Applies the reply to a release: released, lost, or (the release failed) held again. */
  private void settle(Throwable error) {
    synchronized (mu) {
      if (error == null && unwound) { // one acquire of a reentrant hold released: still held
        unwound = false;
        releasing = null;
        if (state == State.RELEASING) state = State.HELD;
        return;
      }
    }
    ErrorCode code = error instanceof LockException ? ((LockException) error).code() : null;
    boolean gone = code == ErrorCode.NOT_HELD || code == ErrorCode.DISCONNECTED;
    // not_held: it had ended, and a lost event still on its way changes nothing now.
    if (error == null || gone) {
      // disconnected: the release went to a connection that had ended; if the lock was resumed
      // on the next one meanwhile, it is given back there.
      if (client.connection.forget(this) && code == ErrorCode.DISCONNECTED) sendGiveBack();
    }
    if (gone) markLost(code.wireName());
    synchronized (mu) {
      releasing = null;
      if (state == State.RELEASING) state = error == null ? State.RELEASED : State.HELD;
    }
  }

  private LockException lostError(String reason) {
    return new LockException(ErrorCode.LOST,
        "the lock on \"" + resource + "\" was lost (" + reason + ")");
  }
}
