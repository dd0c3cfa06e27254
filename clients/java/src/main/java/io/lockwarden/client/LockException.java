package io.lockwarden.client;

/**
 * A request that failed: the agent's error reply, or one of the client's own failures.
 * Branch on {@link #code()}; {@link #agentMessage()} is for people (log it) and its wording may
 * change between versions.
 *
 * <pre>{@code
 * try {
 *   lock = client.acquire("db/migrations", options);
 * } catch (LockException e) {
 *   switch (e.code()) {
 *     case TIMEOUT: ...   // busy: someone else held it for all of the wait
 *     case NO_QUORUM: ... // the lock service cannot decide: retry later
 *     default: throw e;
 *   }
 * }
 * }</pre>
 */
public class LockException extends Exception {
  private static final long serialVersionUID = 1L;

  /** The code to branch on. */
  private final ErrorCode code;
  /** The code as written on the wire. */
  private final String rawCode;
  /** The message for people. */
  private final String agentMessage;

  /**
   * An error with the given machine code (as the agent sends it) and message.
   *
   * @param rawCode the code as on the wire, e.g. {@code "timeout"}
   * @param message the message for people
   */
  public LockException(String rawCode, String message) {
    super(rawCode + ": " + message);
    this.rawCode = rawCode;
    this.code = ErrorCode.fromWire(rawCode);
    this.agentMessage = message;
  }

  /**
   * An error of the client's own, with the given code and message.
   *
   * @param code the code
   * @param message the message for people
   */
  public LockException(ErrorCode code, String message) {
    this(code.wireName(), message);
  }

  /**
   * The machine code to branch on ({@link ErrorCode#UNKNOWN} for a code this version does not
   * know: {@link #rawCode()} has it).
   *
   * @return the code
   */
  public ErrorCode code() {
    return code;
  }

  /**
   * The code exactly as the agent (or the client) wrote it, e.g. {@code "no_quorum"}.
   *
   * @return the raw code
   */
  public String rawCode() {
    return rawCode;
  }

  /**
   * The message without the code: the agent's {@code message} field, or the client's text.
   *
   * @return the message
   */
  public String agentMessage() {
    return agentMessage;
  }
}
