package io.lockwarden.client;

/** The kind of a hold (docs/protocol.md#kinds-of-hold). */
public enum Mode {
  /** The exclusive hold: a mutex's, or the write hold of a read-write lock. */
  EXCLUSIVE("exclusive"),
  /** A shared (read) hold: readers hold it together; an exclusive hold excludes them all. */
  SHARED("shared"),
  /** One permit of a semaphore; {@link Lock#permit()} says which. */
  PERMIT("permit");

  private final String wire;

  Mode(String wire) {
    this.wire = wire;
  }

  /**
   * The mode as the agent writes it ({@code "shared"}, {@code "permit"}); the agent writes no
   * mode for an exclusive hold.
   *
   * @return the wire form
   */
  public String wireName() {
    return wire;
  }

  static Mode fromWire(String wire) {
    for (Mode m : values()) {
      if (m.wire.equals(wire)) return m;
    }
    throw new IllegalArgumentException("unknown mode \"" + wire + "\"");
  }
}
