package io.lockwarden.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.function.Executable;

/**
 * What the tests against a live agent share. The agent is at $LOCKWARDEN_SOCKET (tests are
 * skipped when it is unset). Run by tests/integration/clients_test.cc with LWTEST_CONTROL=stdio,
 * a test that needs the masters changed prints `@@lw ACTION [ARG]` on stdout and reads the
 * harness's answer on stdin (clients/README.md#tests); without it those tests are skipped.
 *
 * <p>The tests pass the same way on a loaded machine and against an ASan-built agent: an acquire
 * that must succeed waits (a free lock is granted at once; the wait only lets the agent retry when
 * a master answered late), an event is awaited with a generous deadline (only a failing test
 * waits it out), and a validity is only checked to come from the ttl asked for (more than half of
 * it), not to the millisecond.
 */
@Timeout(45) // a hang fails the test (its blocking call is interrupted) instead of the whole run
abstract class Harness {
  static final boolean CONTROLLED = "stdio".equals(System.getenv("LWTEST_CONTROL"));
  static final Duration WAIT_LONG = Duration.ofSeconds(10);
  static final Duration EVENT_WAIT = Duration.ofSeconds(15);
  static final Duration HOLD_FOR = Duration.ofMillis(50); // how long a queued waiter is kept
  static final String TOKEN = "[0-9a-f]{40}";

  private static final BufferedReader ANSWERS =
      new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));

  private final List<Client> clients = new ArrayList<>();

  @BeforeEach
  void needsAnAgent() {
    String socket = System.getenv("LOCKWARDEN_SOCKET");
    Assumptions.assumeTrue(socket != null && !socket.isEmpty(), "LOCKWARDEN_SOCKET is not set");
  }

  @AfterEach
  void closeClients() {
    for (Client c : clients) c.close();
  }

  /** A new connection (session), closed after the test. */
  Client client() {
    try {
      Client c = Client.connect();
      clients.add(c);
      return c;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** Asks the harness to act on the masters; returns what follows "ok" in its answer. */
  static synchronized String control(String action) {
    Assumptions.assumeTrue(CONTROLLED, "needs the harness (LWTEST_CONTROL=stdio)");
    System.out.println("@@lw " + action);
    System.out.flush();
    String answer;
    try {
      answer = ANSWERS.readLine();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    assertNotNull(answer, "no answer from the harness to " + action);
    answer = answer.strip();
    assertTrue(answer.startsWith("ok"), "harness could not " + action + ": " + answer);
    return answer.substring(2).strip();
  }

  /**
   * Returns once {@code c}'s new connection holds {@code lock} again (resumed through the
   * agent's next run); until then {@code held()} fails disconnected or lists nothing.
   */
  static void awaitResumed(Client c, Lock lock) throws InterruptedException {
    long deadline = System.nanoTime() + EVENT_WAIT.toNanos();
    for (;;) {
      try {
        if (c.held().stream().anyMatch(l -> lock.token().equals(l.get("token")))) return;
      } catch (LockException e) {
        assertEquals(ErrorCode.DISCONNECTED, e.code(), e.toString());
      }
      assertTrue(!lock.isLost(), lock.toString());
      if (System.nanoTime() > deadline) fail("not resumed: " + lock);
      Thread.sleep(20);
    }
  }

  static long controlLong(String action) {
    return Long.parseLong(control(action));
  }

  static AcquireOptions.Builder ttl(Duration ttl) {
    return AcquireOptions.builder().ttl(ttl);
  }

  /** Runs {@code call}, which must fail with {@code code}; returns the failure. */
  static LockException expectCode(ErrorCode code, Executable call) {
    LockException e = assertThrows(LockException.class, call);
    assertEquals(code, e.code(), () -> "want " + code + ", got " + e);
    return e;
  }

  /** The resources this connection holds, as `held` lists them. */
  static List<Object> heldResources(Client c) throws LockException {
    List<Object> out = new ArrayList<>();
    for (Map<String, Object> l : c.held()) out.add(l.get("resource"));
    return out;
  }

  /** Returns once the agent lists a request waiting for {@code resource}. */
  static void waitQueued(Client c, String resource) throws Exception {
    long deadline = System.nanoTime() + EVENT_WAIT.toNanos();
    for (;;) {
      for (Object l : (List<?>) c.request("locks", Map.of()).get("locks")) {
        Map<?, ?> lock = (Map<?, ?>) l;
        if (resource.equals(lock.get("resource")) && Long.valueOf(1).equals(lock.get("waiters"))) {
          return;
        }
      }
      if (System.nanoTime() > deadline) fail("nobody queued for " + resource);
      Thread.sleep(10);
    }
  }
}
