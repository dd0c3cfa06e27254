package io.lockwarden.client;

import java.util.List;
import java.util.Optional;

/**
 * Several locks taken at once ({@link Client#acquireAll}) and held together: {@link #locks()}
 * in their canonical order (sorted), one per resource, each with its own token and fence. When
 * one of them is lost the set is lost ({@link #lostReason()}) and the others are released;
 * {@link #close()} (try-with-resources) releases them all, and throws {@link ErrorCode#LOST} if
 * the set was lost before.
 */
public final class LockSet implements AutoCloseable {
  private final List<Lock> locks;
  private final Object mu = new Object();
  private String lostReason; // guarded by mu

  LockSet(List<Lock> locks) {
    this.locks = List.copyOf(locks);
    for (Lock lock : this.locks) lock.onLost(this::memberLost);
  }

  /**
   * The locks, one per resource, in their canonical order.
   *
   * @return the locks
   */
  public List<Lock> locks() {
    return locks;
  }

  /**
   * The lock of {@code resource}.
   *
   * @param resource one of the set's resources
   * @return its lock, or empty
   */
  public Optional<Lock> lock(String resource) {
    return locks.stream().filter(l -> l.resource().equals(resource)).findFirst();
  }

  /**
   * Why the first of the set's locks was lost; empty while all are held.
   *
   * @return the reason, or empty
   */
  public Optional<String> lostReason() {
    synchronized (mu) {
      return Optional.ofNullable(lostReason);
    }
  }

  private void memberLost(Lock lost) {
    synchronized (mu) {
      if (lostReason != null) return;
      lostReason = lost.lostReason().orElse("lost");
    }
    for (Lock other : locks) other.releaseAsync(); // lost too, or gone: nothing is held then
  }

  /**
   * Releases every lock of the set, and throws the first failure after trying them all.
   *
   * @throws LockException as {@link Lock#release()}
   */
  public void release() throws LockException {
    for (Lock lock : locks) lock.releaseAsync(); // all on the wire at once
    LockException first = null;
    for (Lock lock : locks) {
      try {
        lock.release(); // waits for the release on the wire
      } catch (LockException e) {
        if (first == null) first = e;
      }
    }
    if (first != null) throw first;
  }

  /**
   * Releases the set, as {@link #release()}; throws {@link ErrorCode#LOST} if it was lost
   * before.
   *
   * @throws LockException {@link ErrorCode#LOST}, or a failure of the release
   */
  @Override
  public void close() throws LockException {
    Optional<String> lost = lostReason();
    if (lost.isPresent()) {
      for (Lock lock : locks) lock.releaseAsync();
      throw new LockException(ErrorCode.LOST, "a lock of the set was lost (" + lost.get() + ")");
    }
    release();
  }
}
