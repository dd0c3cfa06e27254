package io.lockwarden.client;

import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CancellationException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * A {@link Client}'s resumption of its locks across a restart of the agent ({@link Client} has
 * the rules): whether the client has ended, the locks to resume, and the keeper thread, which
 * reads {@code held} while connected (the renewed locks' validity) and, once the connection
 * ended without {@link Client#close()}, connects again with backoff and resumes each lock by
 * token, or marks it lost as {@code agent_lost}. The client's connection is replaced here, under
 * this keeper's lock.
 */
final class Keeper {
  static final String AGENT_LOST = "agent_lost";
  private static final long FIRST_BACKOFF_MS = 50;
  private static final long MAX_BACKOFF_MS = 500;
  private static final long MIN_HELD_EVERY_MS = 100;
  private static final long DEFAULT_TTL_MS = 30_000; // the agent's, for a lock acquired without
  private static final long HELD_WAIT_MS = 5_000;

  private final Client client;
  private final int serial;

  // The keeper thread reads held while connected and resumes the locks once the connection
  // ended; it starts with the first renewed lock or the first unexpected end.
  private final Object mu = new Object(); // guards what follows, and client.connection's writes
  private volatile boolean ended; // closed, or the connection ended with nothing to resume
  private boolean down; // the connection ended and no other one is up yet
  private final Set<Lock> toResume = new LinkedHashSet<>(); // held, not on any live connection
  private long retryAt; // System.nanoTime() of the next attempt (connect or resume)
  private long backoffMs = FIRST_BACKOFF_MS;
  private long heldAt; // when the last held was sent
  private Thread thread;

  Keeper(Client client, int serial) {
    this.client = client;
    this.serial = serial;
  }

  /** Whether the client has ended ({@link Client#isClosed()}). */
  boolean ended() {
    return ended;
  }

  /**
   * The client closes: it ends, and stops resuming (the locks still to resume are lost with
   * reason {@code disconnected}). Returns the connection to close.
   */
  Connection close() {
    Connection c;
    List<Lock> dropped;
    synchronized (mu) {
      ended = true;
      c = client.connection;
      dropped = new ArrayList<>(toResume);
      toResume.clear();
      mu.notifyAll();
    }
    for (Lock l : dropped) l.markLost(ErrorCode.DISCONNECTED.wireName());
    return c;
  }

  /**
   * Called by {@code c}'s reader when {@code c} ended without {@link Client#close()}, with the
   * locks it held: takes those to resume, returns the others (to be marked lost, as before).
   */
  List<Lock> connectionEnded(Connection c, List<Lock> locks) {
    List<Lock> rest = new ArrayList<>();
    synchronized (mu) {
      if (ended || c != client.connection) return locks;
      boolean first = toResume.isEmpty();
      for (Lock l : locks) {
        if (l.resumable()) {
          toResume.add(l);
        } else {
          rest.add(l);
        }
      }
      if (toResume.isEmpty()) {
        ended = true; // nothing to resume: the client ends, as it always did
        mu.notifyAll(); // (a keeper stops)
        return rest;
      }
      down = true;
      if (first) {
        backoffMs = FIRST_BACKOFF_MS;
        retryAt = System.nanoTime();
      }
      startKeeper();
      mu.notifyAll();
    }
    return rest;
  }

  /** Called by a connection's reader once it has ended and settled everything. */
  void connectionDone() {
    if (ended) client.listeners.shutdown(); // what is queued still runs
  }

  /** A renewed lock is held now: the keeper reads held for it. */
  void renewedLockAdded() {
    synchronized (mu) {
      if (ended) return;
      startKeeper();
      mu.notifyAll();
    }
  }

  private void startKeeper() { // under mu
    if (thread != null) return;
    heldAt = System.nanoTime(); // the first held one interval on: the grant's validity holds
    thread = Connection.daemon(this::keep, "lockwarden-keeper-" + serial);
    thread.start();
  }

  private enum Step { WAIT, CONNECT, RESUME, HELD }

  /** The keeper thread's loop: one step at a time until the client ends. */
  private void keep() {
    for (;;) {
      List<Lock> overdue = new ArrayList<>();
      Step step = Step.WAIT;
      boolean finish = false;
      Connection c;
      synchronized (mu) {
        if (ended) return;
        c = client.connection;
        long now = System.nanoTime();
        long next = now + TimeUnit.HOURS.toNanos(1);
        for (Iterator<Lock> it = toResume.iterator(); it.hasNext();) {
          Lock l = it.next();
          if (!l.resumable()) {
            it.remove(); // ended by its user meanwhile (a release failed: disconnected)
          } else if (now - l.validUntil() >= 0) {
            it.remove(); // its validity ran out before it could be resumed
            overdue.add(l);
          } else {
            next = earlier(next, l.validUntil());
          }
        }
        if (down && toResume.isEmpty()) {
          ended = true; // nothing left to resume: the client ends
          finish = true;
        } else if (down) {
          if (now - retryAt >= 0) step = Step.CONNECT;
          next = earlier(next, retryAt);
        } else {
          if (!toResume.isEmpty()) {
            if (now - retryAt >= 0) step = Step.RESUME;
            next = earlier(next, retryAt);
          }
          long every = heldEvery(c);
          if (step == Step.WAIT && every > 0) {
            if (now - (heldAt + every) >= 0) {
              step = Step.HELD;
              heldAt = now;
            }
            next = earlier(next, heldAt + every);
          }
        }
        if (step == Step.WAIT && !finish && overdue.isEmpty()) {
          long ms = Math.max(1, TimeUnit.NANOSECONDS.toMillis(next - now + 999_999));
          try {
            mu.wait(ms);
          } catch (InterruptedException e) {
            return; // nobody interrupts the keeper
          }
          continue;
        }
      }
      for (Lock l : overdue) l.markLost(AGENT_LOST);
      if (finish) {
        client.listeners.shutdown();
        return;
      }
      switch (step) {
        case CONNECT:
          reconnect();
          break;
        case RESUME:
          resume(c);
          break;
        case HELD:
          readHeld(c);
          break;
        default:
          break;
      }
    }
  }

  private static long earlier(long a, long b) {
    return b - a < 0 ? b : a;
  }

  /** How often to read held on {@code c}: a third of its renewed locks' smallest ttl; 0: never. */
  private static long heldEvery(Connection c) {
    long least = 0;
    for (Lock l : c.locks()) {
      if (!l.renews() || !l.resumable()) continue;
      Duration ttl = l.ttlAsked();
      long ms = ttl == null ? DEFAULT_TTL_MS : ttl.toMillis();
      least = least == 0 ? ms : Math.min(least, ms);
    }
    if (least == 0) return 0;
    return TimeUnit.MILLISECONDS.toNanos(Math.max(MIN_HELD_EVERY_MS, least / 3));
  }

  /** The next attempt after {@code backoffMs}, which doubles up to its cap. */
  private void backOff() { // under mu
    retryAt = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(backoffMs);
    backoffMs = Math.min(backoffMs * 2, MAX_BACKOFF_MS);
  }

  /** Connects to the socket again; the new connection becomes the client's. */
  private void reconnect() {
    Connection fresh;
    try {
      fresh = Connection.open(client.socketPath(), client);
    } catch (IOException | RuntimeException e) {
      synchronized (mu) {
        backOff(); // not up yet
      }
      return;
    }
    boolean use;
    synchronized (mu) {
      use = !ended;
      if (use) {
        client.connection = fresh;
        down = false;
        retryAt = System.nanoTime(); // resume at once
        heldAt = retryAt;
      }
    }
    if (use) {
      fresh.start();
    } else {
      fresh.close();
    }
  }

  /**
   * Sends a resume for each lock still to resume, and waits for the replies, each at most
   * until its lock's validity runs out.
   */
  private void resume(Connection c) {
    List<Lock> batch;
    synchronized (mu) {
      batch = new ArrayList<>(toResume);
    }
    batch.removeIf(l -> !l.resumable()); // ended by its user meanwhile
    batch.sort((a, b) -> Long.signum(a.validUntil() - b.validUntil())); // wait in that order
    List<Connection.Pending<Void>> sent = new ArrayList<>();
    for (Lock l : batch) {
      long at = System.nanoTime();
      sent.add(c.send("resume", l.resumeFields(), reply -> {
        resumed(c, l, Wire.millis(reply, "validity_ms"), at);
        return null;
      }));
    }
    for (int i = 0; i < batch.size(); i++) {
      Lock l = batch.get(i);
      Connection.Pending<Void> p = sent.get(i);
      try {
        p.result.get(Math.max(0, l.validUntil() - System.nanoTime()), TimeUnit.NANOSECONDS);
      } catch (TimeoutException e) {
        giveUp(l); // its validity ran out first (a late grant is given back)
      } catch (ExecutionException e) {
        ErrorCode code = e.getCause() instanceof LockException
            ? ((LockException) e.getCause()).code() : ErrorCode.UNKNOWN;
        switch (code) {
          case NOT_HELD: // a quorum does not hold it any more
          case FORBIDDEN:
          case KIND_MISMATCH:
          case BAD_REQUEST: // will never work
            giveUp(l);
            break;
          default: // no_quorum, shutting_down, too_many, disconnected...: try again
            break;
        }
      } catch (InterruptedException e) {
        return; // nobody interrupts the keeper
      }
    }
    synchronized (mu) {
      if (!toResume.isEmpty()) backOff();
    }
  }

  /** On {@code c}'s reader: a resume sent at {@code at} answered ok with {@code validity}. */
  private void resumed(Connection c, Lock l, Duration validity, long at) {
    boolean kept;
    synchronized (mu) {
      kept = toResume.remove(l) && l.resumed(validity, at);
      if (kept) c.register(l); // before the next line: a lost event for it is heard
    }
    if (!kept) { // reported lost (or ended by its user) meanwhile: nobody holds it
      c.send("release", Client.tokenFields("resource", l.resource(), l.token()), r -> null);
    }
  }

  /** {@code l} cannot be resumed: lost, unless it was settled already. */
  private void giveUp(Lock l) {
    boolean mine;
    synchronized (mu) {
      mine = toResume.remove(l);
    }
    if (mine) l.markLost(AGENT_LOST);
  }

  /** Reads held on {@code c}: each renewed lock is valid until then plus its validity_ms. */
  private void readHeld(Connection c) {
    long at = System.nanoTime();
    Connection.Pending<List<Map<String, Object>>> p =
        c.send("held", Map.of(), r -> Wire.objects(r, "locks"));
    List<Map<String, Object>> held;
    try {
      held = p.result.get(HELD_WAIT_MS, TimeUnit.MILLISECONDS);
    } catch (TimeoutException e) {
      p.result.completeExceptionally(new CancellationException("abandoned"));
      return;
    } catch (ExecutionException | InterruptedException e) {
      return; // the connection ended: connectionEnded has it
    }
    for (Map<String, Object> entry : held) {
      Object token = entry.get("token");
      Object validity = entry.get("validity_ms");
      if (!(token instanceof String) || !(validity instanceof Long)) continue;
      Lock l = c.lock((String) token);
      if (l != null) l.validFor(at, Duration.ofMillis((Long) validity));
    }
  }
}
