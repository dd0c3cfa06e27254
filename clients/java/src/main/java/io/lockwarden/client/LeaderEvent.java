package io.lockwarden.client;

import java.util.Optional;

/**
 * A change of an observed election: the {@code leader} event (docs/elections.md#observe).
 * Events of one observation come in term order.
 *
 * @param name the election's name
 * @param leader the new leader; empty when nobody leads now
 * @param term the new leader's term; with no leader, the term of the leader that is gone
 * @param missed true when changes before this one may have gone unseen: the term advanced by
 *     more than one, the agent could not read the masters for a while, or (for {@link
 *     Observation#next}) events were not taken fast enough and older ones were dropped
 */
public record LeaderEvent(String name, Optional<Leader> leader, long term, boolean missed) {
  static LeaderEvent fromWire(java.util.Map<String, Object> m) throws Wire.ProtocolException {
    return new LeaderEvent(Wire.string(m, "name"), Wire.leader(m), Wire.integer(m, "term"),
        Wire.bool(m, "missed"));
  }

  LeaderEvent asMissed() {
    return new LeaderEvent(name, leader, term, true);
  }
}
