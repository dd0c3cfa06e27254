package io.lockwarden.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** Elections and detached leases against the live agent (see {@link Harness}). */
class ElectionTest extends Harness {
  private static CampaignOptions campaign(Duration wait) {
    return CampaignOptions.builder().ttl(Duration.ofSeconds(10)).waitFor(wait).build();
  }

  /** The next event of {@code o}, failing the test if none comes in time. */
  private static LeaderEvent next(Observation o) throws LockException {
    return o.next(EVENT_WAIT).orElseGet(() -> fail("no leader event on " + o.name()));
  }

  @Test
  void electionHandsOverOnResignWithAHigherTerm() throws Exception {
    Client a = client();
    Client b = client();
    Leadership first = a.campaign("java:elect", "host-a:1", campaign(WAIT_LONG));
    assertTrue(first.term() > 0, "term " + first.term());
    assertTrue(first.token().matches(TOKEN), first.token());
    assertEquals("java:elect", first.name());
    Leader leader = b.leader("java:elect").orElseGet(() -> fail("nobody leads"));
    assertEquals("host-a:1", leader.value());
    assertEquals(first.term(), leader.term());
    assertEquals(ProcessHandle.current().pid(), leader.pid());

    Client watcher = client();
    Observation obs = watcher.observe("java:elect");
    assertEquals(Optional.of("host-a:1"), obs.initial().map(Leader::value));
    LinkedBlockingQueue<LeaderEvent> heard = new LinkedBlockingQueue<>();
    obs.onLeader(heard::add);

    CompletableFuture<Leadership> waiting =
        b.campaignAsync("java:elect", "host-b:2", campaign(Duration.ofSeconds(30)));
    waitQueued(a, "java:elect");
    assertFalse(waiting.isDone(), "b elected while a leads");
    first.resign();
    Leadership second = waiting.get(EVENT_WAIT.toMillis(), TimeUnit.MILLISECONDS);
    assertTrue(second.term() > first.term(), second.term() + " after " + first.term());
    assertEquals(Optional.of("host-b:2"), a.leader("java:elect").map(Leader::value));

    for (;;) { // events come in term order: wait for the one naming b
      LeaderEvent e = next(obs);
      assertTrue(e.term() >= first.term(), "event of term " + e.term() + " after " + first.term());
      if (!e.leader().map(Leader::value).equals(Optional.of("host-b:2"))) continue;
      assertEquals(second.term(), e.term());
      assertEquals(second.term(), obs.term().getAsLong());
      assertEquals(Optional.of("host-b:2"), obs.leader().map(Leader::value));
      break;
    }
    for (;;) { // the listener heard it too
      LeaderEvent e = heard.poll(EVENT_WAIT.toMillis(), TimeUnit.MILLISECONDS);
      if (e == null) fail("the listener never heard b elected");
      if (e.term() == second.term()) break;
    }

    obs.unobserve();
    assertTrue(obs.isEnded());
    for (;;) { // what came before the unobserve can still be taken, then it ends
      try {
        next(obs);
      } catch (LockException e) {
        assertEquals(ErrorCode.NOT_HELD, e.code());
        break;
      }
    }
    expectCode(ErrorCode.NOT_HELD, () -> watcher.unobserve("java:elect"));
    expectCode(ErrorCode.NOT_HELD, () -> b.resign("java:elect", first.token()));
    assertEquals(List.of("java:elect"), heldResources(b));
    b.resign("java:elect", second.token());
    assertEquals(Optional.empty(), a.leader("java:elect"));
  }

  @Test
  void leadershipEndsWithItsClient() throws Exception {
    Client a = client();
    Client b = client();
    Leadership lead = a.campaign("java:elect-close", "host-a:1", campaign(WAIT_LONG));
    Client watcher = client();
    Observation obs = watcher.observe("java:elect-close");
    assertEquals(Optional.of(lead.term()), obs.initial().map(Leader::term));
    expectCode(ErrorCode.TIMEOUT,
        () -> b.campaign("java:elect-close", "host-b:2", campaign(Duration.ofMillis(100))));
    expectCode(ErrorCode.KIND_MISMATCH, () -> b.acquire("java:elect-close",
        AcquireOptions.builder().ttl(Duration.ofSeconds(10)).build()));
    a.close();
    assertEquals(Optional.of("disconnected"), lead.awaitLost(EVENT_WAIT));
    LeaderEvent gone = next(obs);
    assertEquals(Optional.empty(), gone.leader());
    assertEquals(lead.term(), gone.term());
    assertEquals(Optional.empty(), obs.leader());
    watcher.close();
    expectCode(ErrorCode.DISCONNECTED, () -> obs.next(EVENT_WAIT));
  }

  @Test
  void detachedLeaseOutlivesItsClient() throws Exception {
    Client a = client();
    Client b = client();
    Lock lease = a.acquire("java:lease", AcquireOptions.builder().ttl(Duration.ofMinutes(1))
        .waitFor(WAIT_LONG).detach(true).build());
    assertTrue(lease.isDetached());
    assertEquals(List.of(), heldResources(a)); // no connection holds a lease
    a.close();
    assertFalse(lease.isLost());
    expectCode(ErrorCode.TIMEOUT, () -> b.acquire("java:lease",
        AcquireOptions.builder().ttl(Duration.ofSeconds(1)).build()));
    Duration validity = b.extend("java:lease", lease.token(), Duration.ofSeconds(30));
    assertTrue(validity.compareTo(Duration.ofSeconds(15)) > 0, validity.toString());
    b.release("java:lease", lease.token());
    expectCode(ErrorCode.NOT_HELD, () -> b.release("java:lease", lease.token()));
    expectCode(ErrorCode.NOT_HELD,
        () -> b.extend("java:lease", lease.token(), Duration.ofSeconds(30)));
    b.acquire("java:lease", AcquireOptions.builder().ttl(Duration.ofSeconds(1)).build())
        .release();
  }

  @Test
  void aLeadershipIsResumedAfterTheAgentRestarts() throws Exception {
    Client a = client();
    Leadership leadership = a.campaign("java:lead-resume", "host-a:1",
        CampaignOptions.builder().ttl(Duration.ofSeconds(4)).waitFor(WAIT_LONG).build());
    CompletableFuture<Lock> heard = new CompletableFuture<>();
    leadership.onLost(heard::complete);
    control("restart-agent"); // kill -9: the leadership stays on the masters for the next run
    awaitResumed(a, leadership);
    assertEquals(Optional.of(leadership.term()), a.leader("java:lead-resume").map(Leader::term));
    Thread.sleep(4_500); // past the ttl: only the new run's renewals keep it
    assertEquals(5, controlLong("count java:lead-resume"));
    assertFalse(heard.isDone(), "reported lost");
    leadership.resign();
    assertEquals(Optional.empty(), a.leader("java:lead-resume"));
  }
}
