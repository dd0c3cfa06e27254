package io.lockwarden.client;

/**
 * The machine code of a {@link LockException}: the agent's error codes (docs/protocol.md#errors)
 * and the client's own ({@link #DISCONNECTED}, {@link #LOST}, {@link #INTERRUPTED}).
 * {@link LockException#rawCode()} keeps the exact string; a code this client does not know
 * yet is {@link #UNKNOWN}.
 */
public enum ErrorCode {
  /** A field is missing, mistyped or out of range; the message says which. Fix the request. */
  BAD_REQUEST("bad_request"),
  /** Someone else held the resource for all of the wait: contention, not an outage. */
  TIMEOUT("timeout"),
  /** Too few masters answered to decide: an outage, not contention. Retry with backoff. */
  NO_QUORUM("no_quorum"),
  /** That token does not hold that resource now (expired, lost, released, another's). */
  NOT_HELD("not_held"),
  /** A limit of the agent was reached; the message names the setting. */
  TOO_MANY("too_many"),
  /** No access rule lets this peer lock that resource, or manage that detached lease. */
  FORBIDDEN("forbidden"),
  /** The resource is in use as another kind, or as a semaphore of another size. */
  KIND_MISMATCH("kind_mismatch"),
  /** This connection holds the resource already, so the acquire would wait for itself. */
  WOULD_DEADLOCK("would_deadlock"),
  /** The agent is stopping; reconnect after a short delay. */
  SHUTTING_DOWN("shutting_down"),
  /** A bug or unexpected state in the agent (logged there). */
  INTERNAL("internal"),
  /** Client: the connection to the agent ended (or was never usable); its locks are gone. */
  DISCONNECTED("disconnected"),
  /** Client: the lock was lost (the agent pushed {@code lost}, or the connection ended). */
  LOST("lost"),
  /** Client: the calling thread was interrupted while it waited; its interrupt status is set. */
  INTERRUPTED("interrupted"),
  /** A code this version of the client does not know; see {@link LockException#rawCode()}. */
  UNKNOWN("");

  private final String wire;

  ErrorCode(String wire) {
    this.wire = wire;
  }

  /**
   * The code as it appears on the wire ({@code "no_quorum"}, ...); empty for {@link #UNKNOWN}.
   *
   * @return the wire form of the code
   */
  public String wireName() {
    return wire;
  }

  /**
   * The code named {@code wire} on the wire, {@link #UNKNOWN} for any other string.
   *
   * @param wire a code as the agent sends it
   * @return the matching code
   */
  public static ErrorCode fromWire(String wire) {
    for (ErrorCode c : values()) {
      if (c != UNKNOWN && c.wire.equals(wire)) return c;
    }
    return UNKNOWN;
  }
}
