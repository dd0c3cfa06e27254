package io.lockwarden.client;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/** Typed reads of the fields of the agent's lines; a line that breaks the protocol throws. */
final class Wire {
  /** The agent sent something the protocol does not allow (docs/protocol.md). */
  static final class ProtocolException extends Exception {
    private static final long serialVersionUID = 1L;

    ProtocolException(String message) {
      super(message);
    }
  }

  private Wire() {}

  static String string(Map<String, Object> m, String key) throws ProtocolException {
    Object v = m.get(key);
    if (!(v instanceof String)) throw missing(key, "a string");
    return (String) v;
  }

  static long integer(Map<String, Object> m, String key) throws ProtocolException {
    Object v = m.get(key);
    if (!(v instanceof Long)) throw missing(key, "an integer");
    return (Long) v;
  }

  /** An integer field that may be absent (never null). */
  static Long optionalInteger(Map<String, Object> m, String key) throws ProtocolException {
    return m.containsKey(key) ? integer(m, key) : null;
  }

  static boolean bool(Map<String, Object> m, String key) throws ProtocolException {
    Object v = m.get(key);
    if (!(v instanceof Boolean)) throw missing(key, "a boolean");
    return (Boolean) v;
  }

  static Duration millis(Map<String, Object> m, String key) throws ProtocolException {
    return Duration.ofMillis(integer(m, key));
  }

  @SuppressWarnings("unchecked")
  static List<Map<String, Object>> objects(Map<String, Object> m, String key)
      throws ProtocolException {
    Object v = m.get(key);
    if (!(v instanceof List)) throw missing(key, "an array");
    for (Object item : (List<?>) v) {
      if (!(item instanceof Map)) throw missing(key, "an array of objects");
    }
    return (List<Map<String, Object>>) v;
  }

  /** The {@code leader} field: an object, or null when nobody leads. */
  @SuppressWarnings("unchecked")
  static Optional<Leader> leader(Map<String, Object> m) throws ProtocolException {
    if (!m.containsKey("leader")) throw missing("leader", "an object or null");
    Object v = m.get("leader");
    if (v == null) return Optional.empty();
    if (!(v instanceof Map)) throw missing("leader", "an object or null");
    Map<String, Object> l = (Map<String, Object>) v;
    return Optional.of(new Leader(string(l, "value"), string(l, "agent"), string(l, "host"),
        integer(l, "pid"), integer(l, "since"), integer(l, "term")));
  }

  private static ProtocolException missing(String key, String what) {
    return new ProtocolException("field \"" + key + "\" is not " + what);
  }
}
