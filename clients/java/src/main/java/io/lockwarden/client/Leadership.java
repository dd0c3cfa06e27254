package io.lockwarden.client;

import java.util.Map;

/**
 * A won campaign: this client leads the election {@link #name()} with {@link #term()} while its
 * connection lives, and through the agent's next run once resumed, as a lock is
 * (docs/elections.md). The agent renews it by itself.
 *
 * <p>It is lost like a {@link Lock} ({@link #isLost()}, {@link #onLost}, usually with {@code
 * renew_failed}): stop acting as the leader at once. {@link #resign()}, {@link #release()} and
 * {@link #close()} resign; {@link #extend} works as for a lock. Hand the term to whatever the
 * leader writes, and have it refuse a term lower than the highest it has seen.
 */
public final class Leadership extends Lock {
  private final long term;

  /** The reply to a campaign with {@code options}, sent at {@code sentAt} (System.nanoTime()). */
  Leadership(Client client, Map<String, Object> reply, CampaignOptions options, long sentAt)
      throws Wire.ProtocolException {
    super(client, Wire.string(reply, "name"), reply, sentAt, options.ttl(), true, 0, false);
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
  Map<String, Object> resumeFields() {
    Map<String, Object> f = super.resumeFields();
    f.put("election", true); // docs/protocol.md#resume: a leadership names its term
    f.put("fence", term);
    return f;
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
