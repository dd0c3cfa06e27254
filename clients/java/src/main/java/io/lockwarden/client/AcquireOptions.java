package io.lockwarden.client;

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;

/**
 * The optional fields of an acquire (docs/protocol.md#acquire). Immutable; build one with
 * {@link #builder()}. What is not set is left to the agent's defaults (ttl 30 s, one attempt).
 * The client does not check ranges: the agent refuses a value out of range with {@link
 * ErrorCode#BAD_REQUEST}, naming the field.
 *
 * <pre>{@code
 * AcquireOptions o = AcquireOptions.builder()
 *     .ttl(Duration.ofSeconds(30)).waitFor(Duration.ofSeconds(5)).renew(true).build();
 * }</pre>
 */
public final class AcquireOptions {
  private static final AcquireOptions DEFAULTS = builder().build();

  private final Duration ttl;
  private final Duration waitFor;
  private final boolean renew;
  private final boolean fence;
  private final int permits;
  private final boolean shared;
  private final boolean detach;
  private final long owner;
  private final boolean reentrant;

  private AcquireOptions(Builder b) {
    ttl = b.ttl;
    waitFor = b.waitFor;
    renew = b.renew;
    fence = b.fence;
    permits = b.permits;
    shared = b.shared;
    detach = b.detach;
    owner = b.owner;
    reentrant = b.reentrant;
  }

  /**
   * The agent's defaults: ttl 30 s, one attempt, an exclusive hold of this connection.
   *
   * @return options with nothing set
   */
  public static AcquireOptions defaults() {
    return DEFAULTS;
  }

  /**
   * A builder with nothing set.
   *
   * @return a new builder
   */
  public static Builder builder() {
    return new Builder();
  }

  /** The request's fields, in the wire's names; {@code owner}: who asks (docs/protocol.md). */
  Map<String, Object> fields(String resource, long owner) {
    Map<String, Object> f = new LinkedHashMap<>();
    f.put("resource", Objects.requireNonNull(resource, "resource"));
    if (ttl != null) f.put("ttl_ms", ttl.toMillis());
    f.put("wait_ms", waitFor == null ? 0L : waitFor.toMillis());
    if (renew) f.put("renew", true);
    if (fence) f.put("fence", true);
    if (permits != 0) f.put("permits", permits);
    if (shared) f.put("shared", true);
    if (detach) f.put("detach", true);
    f.put("owner", owner);
    if (reentrant) f.put("reentrant", true);
    return f;
  }

  /** The owner set, or 0: the asking thread. */
  long owner() {
    return owner;
  }

  boolean reentrant() {
    return reentrant;
  }

  boolean detach() {
    return detach;
  }

  Duration ttl() {
    return ttl;
  }

  boolean renew() {
    return renew;
  }

  int permits() {
    return permits;
  }

  /** Builds {@link AcquireOptions}. */
  public static final class Builder {
    private Duration ttl;
    private Duration waitFor;
    private boolean renew;
    private boolean fence;
    private int permits;
    private boolean shared;
    private boolean detach;
    private long owner;
    private boolean reentrant;

    private Builder() {}

    /**
     * How long the lock lives on the masters if nobody extends it ({@code ttl_ms}, whole
     * milliseconds; agent default 30 s).
     *
     * @param ttl the time to live
     * @return this builder
     */
    public Builder ttl(Duration ttl) {
      this.ttl = Objects.requireNonNull(ttl, "ttl");
      return this;
    }

    /**
     * How long to keep trying while another holder has it ({@code wait_ms}; default zero: one
     * attempt). Past it the acquire fails with {@link ErrorCode#TIMEOUT}.
     *
     * @param wait the longest wait
     * @return this builder
     */
    public Builder waitFor(Duration wait) {
      this.waitFor = Objects.requireNonNull(wait, "wait");
      return this;
    }

    /**
     * Whether the agent extends the lock every ttl/3 by itself while this client stays
     * connected ({@code renew}). Cannot go with {@link #detach(boolean)}.
     *
     * @param renew true to have the agent renew it
     * @return this builder
     */
    public Builder renew(boolean renew) {
      this.renew = renew;
      return this;
    }

    /**
     * Whether the grant carries a fencing token ({@link Lock#fence()}), which needs the fence
     * quorum of masters. Not with a shared hold.
     *
     * @param fence true to get a fence
     * @return this builder
     */
    public Builder fence(boolean fence) {
      this.fence = fence;
      return this;
    }

    /**
     * Takes one permit of a semaphore of {@code permits} (at most that many holders at once;
     * every holder must name the same number). Zero (the default) is a lock, not a semaphore.
     *
     * @param permits the semaphore's size, 1 to 1024
     * @return this builder
     */
    public Builder permits(int permits) {
      this.permits = permits;
      return this;
    }

    /**
     * Takes a shared (read) hold: readers share the resource, an exclusive hold excludes them.
     *
     * @param shared true for a read hold
     * @return this builder
     */
    public Builder shared(boolean shared) {
      this.shared = shared;
      return this;
    }

    /**
     * Takes a detached lease: it outlives this client, and ends at its ttl or when released by
     * its token ({@link Client#release(String, String)}) from any connection of this uid.
     * Nothing renews it and no {@code lost} comes for it.
     *
     * @param detach true for a detached lease
     * @return this builder
     */
    public Builder detach(boolean detach) {
      this.detach = detach;
      return this;
    }

    /**
     * Who in the program asks ({@code owner}, 1 to 2^53 - 1): by default the thread that calls
     * acquire. An acquire that could only wait for a hold of the same owner fails at once with
     * {@link ErrorCode#WOULD_DEADLOCK}; other owners of the same client wait for each other.
     *
     * @param owner the owner, e.g. a task's id; 0 for the calling thread
     * @return this builder
     */
    public Builder owner(long owner) {
      this.owner = owner;
      return this;
    }

    /**
     * Whether a mutex or write hold this owner holds already is taken again ({@code
     * reentrant}): the same {@link Lock}, one more acquire deep ({@link Lock#depth()}), let go
     * of by as many releases (or try-with-resources blocks ending). Not with permits, shared or
     * detach.
     *
     * @param reentrant true to take the owner's hold again
     * @return this builder
     */
    public Builder reentrant(boolean reentrant) {
      this.reentrant = reentrant;
      return this;
    }

    /**
     * The options.
     *
     * @return the options built
     */
    public AcquireOptions build() {
      return new AcquireOptions(this);
    }
  }
}
