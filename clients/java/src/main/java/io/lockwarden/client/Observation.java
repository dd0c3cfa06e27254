package io.lockwarden.client;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * Follows who leads an election ({@link Client#observe}): the leader when it started, then every
 * change the agent pushes (the {@code leader} event, docs/elections.md#observe), in term order.
 *
 * <p>Take the changes with {@link #next(Duration)} (they are queued: up to {@value #QUEUED}; past
 * that the oldest is dropped and the next one taken says {@code missed}), or with a listener
 * ({@link #onLeader}). It runs until {@link #unobserve()}, an observe of the same name on the same
 * client, or the end of the connection. Thread-safe.
 */
public final class Observation {
  /** How many events {@link #next(Duration)} keeps for a slow taker. */
  public static final int QUEUED = 64;

  private final Client client;
  private final String name;
  private final Optional<Leader> initial;
  private final List<Consumer<? super LeaderEvent>> listeners = new CopyOnWriteArrayList<>();

  private final Object mu = new Object(); // guards the fields below
  private final ArrayDeque<LeaderEvent> queue = new ArrayDeque<>();
  private boolean dropped; // the next event taken says missed
  private Optional<Leader> latest;
  private Long term;
  private ErrorCode endCode;
  private String endReason;

  Observation(Client client, Map<String, Object> reply) throws Wire.ProtocolException {
    this.client = client;
    this.name = Wire.string(reply, "name");
    this.initial = Wire.leader(reply);
    this.latest = initial;
    this.term = initial.map(Leader::term).orElse(null);
  }

  /**
   * The election observed.
   *
   * @return its name
   */
  public String name() {
    return name;
  }

  /**
   * The leader when the observation started (the observe reply).
   *
   * @return the leader then, or empty if nobody led
   */
  public Optional<Leader> initial() {
    return initial;
  }

  /**
   * The latest leader known: from the last event, else the observe reply.
   *
   * @return the leader, or empty if nobody leads
   */
  public Optional<Leader> leader() {
    synchronized (mu) {
      return latest;
    }
  }

  /**
   * The latest term known (with no leader, the term of the one gone).
   *
   * @return the term, or empty before any term is known
   */
  public OptionalLong term() {
    synchronized (mu) {
      return term == null ? OptionalLong.empty() : OptionalLong.of(term);
    }
  }

  /**
   * Adds a listener called with every later event, on the client's listener thread (one call
   * at a time, in order). Events are queued for {@link #next} all the same.
   *
   * @param listener called with each event
   * @return this observation
   */
  public Observation onLeader(Consumer<? super LeaderEvent> listener) {
    listeners.add(listener);
    return this;
  }

  /**
   * Takes the next event, waiting up to {@code timeout} for one.
   *
   * @param timeout the longest wait
   * @return the event, or empty if none came within the timeout
   * @throws LockException once the observation has ended and every event before its end is
   *     taken: {@link ErrorCode#NOT_HELD} (unobserved, or observed again) or {@link
   *     ErrorCode#DISCONNECTED}; {@link ErrorCode#INTERRUPTED} if the thread was interrupted
   */
  public Optional<LeaderEvent> next(Duration timeout) throws LockException {
    long deadline = System.nanoTime() + nanos(timeout);
    synchronized (mu) {
      while (queue.isEmpty()) {
        if (endCode != null) {
          throw new LockException(endCode, "the observation of \"" + name + "\" ended: "
              + endReason);
        }
        long left = deadline - System.nanoTime();
        if (left <= 0) return Optional.empty();
        try {
          TimeUnit.NANOSECONDS.timedWait(mu, left);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw new LockException(ErrorCode.INTERRUPTED, "interrupted while waiting for an event");
        }
      }
      LeaderEvent e = queue.poll();
      if (dropped) {
        dropped = false;
        e = e.asMissed();
      }
      return Optional.of(e);
    }
  }

  /**
   * Whether the observation has ended (its queued events can still be taken).
   *
   * @return true once ended
   */
  public boolean isEnded() {
    synchronized (mu) {
      return endCode != null;
    }
  }

  /**
   * Stops the events: {@link Client#unobserve(String)} of this name.
   *
   * @throws LockException as {@link Client#unobserve(String)}
   */
  public void unobserve() throws LockException {
    client.unobserve(name);
  }

  /**
   * {@link #unobserve()} without waiting.
   *
   * @return completes once the agent stopped the events
   */
  public CompletableFuture<Void> unobserveAsync() {
    return client.unobserveAsync(name);
  }

  @Override
  public String toString() {
    return "Observation{" + name + ", leader " + leader().map(Leader::value).orElse("none") + "}";
  }

  /** Called by the reader with each event of this name. */
  void push(LeaderEvent e) {
    synchronized (mu) {
      if (endCode != null) return;
      latest = e.leader();
      term = e.term();
      if (queue.size() == QUEUED) {
        queue.poll();
        dropped = true;
      }
      queue.add(e);
      mu.notifyAll();
    }
    for (Consumer<? super LeaderEvent> l : listeners) {
      client.runListener(() -> l.accept(e));
    }
  }

  void end(ErrorCode code, String reason) {
    synchronized (mu) {
      if (endCode != null) return;
      endCode = code;
      endReason = reason;
      mu.notifyAll();
    }
  }

  /** Ends an observation nobody took (its observe was abandoned), without waiting. */
  void giveBack() {
    if (client.connection.forget(name, this) == null) return;
    end(ErrorCode.NOT_HELD, "abandoned");
    client.sendUnobserve(name);
  }

  static long nanos(Duration d) {
    try {
      return Math.max(0, d.toNanos());
    } catch (ArithmeticException e) {
      return d.isNegative() ? 0 : Long.MAX_VALUE / 4;
    }
  }
}
