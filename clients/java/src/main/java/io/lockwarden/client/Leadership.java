package io.lockwarden.client;

import java.util.Map;

/**
 * A won campaign: this client leads the election {@link #name()} with {@link #term()} while its
 * connection lives (docs/elections.md). The agent renews it by itself.
 *
 * <p>It is lost like a {@link Lock} ({@link #isLost()}, {@link #onLost}, usually with {@code
 * renew_failed}): stop acting as the leader at once. {@link #resign()}, {@link #release()} and
 * {@link #close()} resign; {@link #extend} works as for a lock. Hand the term to whatever the
 * leader writes, and have it refuse a term lower than the highest it has seen.
 */
public final class Leadership extends Lock {
  private final long term;

  Leadership(Client client, Map<String, Object> reply) throws Wire.ProtocolException {
    super(client, Wire.string(reply, "name"), reply, null, System.nanoTime());
    this.term = Wire.integer(reply, "term");
  }

  /**
   * The election's name (the same as {@link #resource()}).
   *
   * @return the name
   */
  public String name() {
    return resource();
  }

  /**
   * This leadership's term: the fence of its grant, higher than every earlier leader's.
   *
   * @return the term
   */
  public long term() {
    return term;
  }

  /**
   * Stops leading now: the same as {@link #release()}. Does nothing if already resigned or
   * lost.
   *
   * @throws LockException as {@link #release()}
   */
  public void resign() throws LockException {
    release();
  }

  @Override
  boolean resumable() {
    return false; // a leader campaigns again
  }

  @Override
  Connection.Pending<Void> sendGiveBack() {
    return client.sendResign(name(), token());
  }

  @Override
  public String toString() {
    return "Leadership{" + name() + ", term " + term + stateNote() + "}";
  }
}
