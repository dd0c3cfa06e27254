package io.lockwarden.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** Mutexes, semaphores and read holds against the live agent (see {@link Harness}). */
class LockTest extends Harness {
  @Test
  void acquireAndRelease() throws Exception {
    Client a = client();
    Lock lock = a.acquire("java:basic", ttl(Duration.ofSeconds(10)).waitFor(WAIT_LONG).build());
    assertTrue(lock.token().matches(TOKEN), lock.token());
    assertTrue(lock.validity().compareTo(Duration.ofSeconds(5)) > 0, lock.validity().toString());
    assertEquals("java:basic", lock.resource());
    assertEquals(Mode.EXCLUSIVE, lock.mode());
    assertTrue(lock.permit().isEmpty() && lock.fence().isEmpty() && !lock.isDetached());
    assertEquals(List.of("java:basic"), heldResources(a));
    if (CONTROLLED) assertEquals(5, controlLong("count java:basic"));
    lock.release();
    assertEquals(List.of(), heldResources(a));
    if (CONTROLLED) assertEquals(0, controlLong("count java:basic"));
    lock.close(); // released already: nothing to do
    assertFalse(lock.isLost());
  }

  @Test
  void tryWithResourcesReleases() throws Exception {
    Client a = client();
    try (Lock lock = a.acquire("java:scoped", ttl(Duration.ofSeconds(10)).waitFor(WAIT_LONG)
        .build())) {
      assertEquals(List.of(lock.resource()), heldResources(a));
    }
    assertEquals(List.of(), heldResources(a));
  }

  @Test
  void aThreadAskingAgainIsWouldDeadlockOrReentrantAnotherThreadWaits() throws Exception {
    Client a = client();
    try (Lock lock = a.acquire("java:again", ttl(Duration.ofSeconds(10)).waitFor(WAIT_LONG)
        .build())) {
      expectCode(ErrorCode.WOULD_DEADLOCK, () -> a.acquire("java:again",
          ttl(Duration.ofSeconds(10)).waitFor(Duration.ofSeconds(30)).build()));
      try (Lock inner = a.acquire("java:again", ttl(Duration.ofSeconds(10)).waitFor(WAIT_LONG)
          .reentrant(true).build())) {
        assertSame(lock, inner);
        assertEquals(2, lock.depth());
      }
      assertEquals(1, lock.depth());
      assertFalse(lock.isLost());
      assertEquals(List.of("java:again"), heldResources(a));
      // Another thread of the same client is another owner: it waits for the hold.
      CompletableFuture<Lock> other = CompletableFuture.supplyAsync(() -> {
        try {
          return a.acquire("java:again", ttl(Duration.ofSeconds(10))
              .waitFor(Duration.ofSeconds(30)).build());
        } catch (LockException e) {
          throw new RuntimeException(e);
        }
      });
      waitQueued(a, "java:again");
      lock.release();
      other.get(EVENT_WAIT.toMillis(), TimeUnit.MILLISECONDS).release();
    }
  }

  @Test
  void severalResourcesAreTakenAllOrNoneAndHeldTogether() throws Exception {
    Client a = client();
    Client b = client();
    LockSet set = a.acquireAll(List.of("java:set-b", "java:set-a"),
        ttl(Duration.ofSeconds(2)).waitFor(WAIT_LONG).build());
    // Lost together: java:set-a expires (not renewed) while java:set-b, extended far past it,
    // is held; the set then lets go of java:set-b.
    set.lock("java:set-b").orElseThrow().extend(Duration.ofMinutes(1));
    assertEquals(List.of("java:set-a", "java:set-b"),
        set.locks().stream().map(Lock::resource).toList());
    assertNotEquals(set.locks().get(0).token(), set.locks().get(1).token());
    expectCode(ErrorCode.TIMEOUT, () -> b.acquireAll(List.of("java:set-c", "java:set-b"),
        ttl(Duration.ofSeconds(10)).waitFor(Duration.ofMillis(200)).build()));
    assertEquals(List.of(), heldResources(b));
    long deadline = System.nanoTime() + EVENT_WAIT.toNanos();
    while (!heldResources(a).isEmpty() || set.lostReason().isEmpty()) {
      assertTrue(System.nanoTime() < deadline, "the set was not lost, or still holds java:set-b");
      Thread.sleep(10);
    }
    assertEquals(Optional.of("expired"), set.lostReason());
    expectCode(ErrorCode.LOST, set::close);
  }

  @Test
  void timeoutWhenAnotherClientHoldsIt() throws Exception {
    Client a = client();
    Client b = client();
    a.acquire("java:busy", ttl(Duration.ofSeconds(10)).waitFor(WAIT_LONG).build());
    LockException e = expectCode(ErrorCode.TIMEOUT, () -> b.acquire("java:busy",
        ttl(Duration.ofSeconds(1)).waitFor(Duration.ofMillis(200)).build()));
    assertEquals("timeout", e.rawCode());
    assertTrue(e.agentMessage().contains("java:busy"), e.agentMessage());
  }

  @Test
  void errorsCarryTheAgentsCodeAndMessage() throws Exception {
    Client a = client();
    LockException e = expectCode(ErrorCode.BAD_REQUEST,
        () -> a.acquire("java:bad", ttl(Duration.ofMillis(1)).build()));
    assertEquals("bad_request", e.rawCode());
    assertTrue(e.agentMessage().contains("ttl_ms"), e.agentMessage());
    e = expectCode(ErrorCode.BAD_REQUEST, () -> a.request("acquire", Map.of("resource", "x",
        "ttl", 1000)));
    assertTrue(e.agentMessage().contains("ttl"), e.agentMessage());
    e = expectCode(ErrorCode.BAD_REQUEST, () -> a.request("nope", Map.of()));
    assertTrue(e.getMessage().startsWith("bad_request: "), e.getMessage());
    assertThrows(IllegalArgumentException.class, () -> a.request("ping", Map.of("id", 1)));
    a.ping(); // the session is still fine
  }

  @Test
  void fencedGrantsCarryIncreasingFences() throws Exception {
    Client a = client();
    AcquireOptions fenced = ttl(Duration.ofSeconds(10)).waitFor(WAIT_LONG).fence(true).build();
    Lock first = a.acquire("java:fenced", fenced);
    first.release();
    Lock second = a.acquire("java:fenced", fenced);
    assertTrue(first.fence().isPresent() && second.fence().isPresent());
    assertTrue(second.fence().getAsLong() > first.fence().getAsLong(),
        first.fence() + " then " + second.fence());
    LockException e = expectCode(ErrorCode.BAD_REQUEST, () -> a.acquire("java:fenced-read",
        ttl(Duration.ofSeconds(10)).shared(true).fence(true).build()));
    assertTrue(e.agentMessage().contains("fence"), e.agentMessage());
  }

  @Test
  void semaphoreAdmitsKHoldersAndRefusesAnotherSize() throws Exception {
    Client a = client();
    Client b = client();
    AcquireOptions o = ttl(Duration.ofSeconds(10)).waitFor(WAIT_LONG).permits(2).build();
    Lock first = a.acquire("java:pool", o);
    Lock second = b.acquire("java:pool", o);
    assertEquals(Mode.PERMIT, first.mode());
    assertEquals(Mode.PERMIT, second.mode());
    assertEquals(Set.of(0, 1), Set.of(first.permit().getAsInt(), second.permit().getAsInt()));
    Client c = client();
    expectCode(ErrorCode.TIMEOUT,
        () -> c.acquire("java:pool", ttl(Duration.ofSeconds(10)).permits(2).build()));
    expectCode(ErrorCode.KIND_MISMATCH,
        () -> c.acquire("java:pool", ttl(Duration.ofSeconds(10)).permits(3).build()));
    first.release();
    Lock third = c.acquire("java:pool", o); // a permit is free again
    assertEquals(first.permit(), third.permit());
  }

  @Test
  void sharedHoldsShareAndKeepTheExclusiveHoldOut() throws Exception {
    Client a = client();
    Client b = client();
    AcquireOptions read = ttl(Duration.ofSeconds(10)).waitFor(WAIT_LONG).shared(true).build();
    Lock r1 = a.acquire("java:cfg", read);
    Lock r2 = b.acquire("java:cfg", read);
    assertEquals(Mode.SHARED, r1.mode());
    assertEquals(Mode.SHARED, r2.mode());
    assertTrue(r1.permit().isEmpty());
    Client c = client();
    expectCode(ErrorCode.TIMEOUT,
        () -> c.acquire("java:cfg", ttl(Duration.ofSeconds(10)).build()));
    expectCode(ErrorCode.BAD_REQUEST, () -> a.acquire("java:other",
        AcquireOptions.builder().permits(2).shared(true).build()));
    r1.release();
    r2.release();
    c.acquire("java:cfg", ttl(Duration.ofSeconds(10)).waitFor(WAIT_LONG).build()).release();
  }

  @Test
  void waiterGetsTheLockWhenTheHolderReleases() throws Exception {
    Client a = client();
    Client b = client();
    Lock holder = a.acquire("java:queue", ttl(Duration.ofSeconds(10)).waitFor(WAIT_LONG).build());
    CompletableFuture<Lock> waiting = b.acquireAsync("java:queue",
        ttl(Duration.ofSeconds(10)).waitFor(Duration.ofSeconds(30)).build());
    waitQueued(a, "java:queue");
    // b queued before now: held HOLD_FOR longer, it has waited at least that long when granted.
    Thread.sleep(HOLD_FOR.toMillis());
    assertFalse(waiting.isDone());
    holder.release();
    Lock got = waiting.get(EVENT_WAIT.toMillis(), TimeUnit.MILLISECONDS);
    assertTrue(got.waited().compareTo(HOLD_FOR) >= 0, got.waited().toString());
    assertEquals(List.of("java:queue"), heldResources(b));
  }

  @Test
  void renewKeepsTheLockPastItsTtl() throws Exception {
    Client a = client();
    Client b = client();
    Lock lock = a.acquire("java:renew",
        ttl(Duration.ofSeconds(2)).waitFor(WAIT_LONG).renew(true).build());
    // The sleep is the point of the test: without renewals the lock would expire (and be
    // reported lost) after 2 s. The ttl is long enough that a renewal every ttl/3 on a loaded
    // machine is never late.
    Thread.sleep(3_500);
    lock.check();
    List<Map<String, Object>> held = a.held();
    assertEquals(1, held.size());
    assertEquals(true, held.get(0).get("renew"));
    expectCode(ErrorCode.TIMEOUT, () -> b.acquire("java:renew",
        ttl(Duration.ofSeconds(1)).waitFor(Duration.ofMillis(200)).build()));
  }

  @Test
  void explicitExtend() throws Exception {
    Client a = client();
    // 5 s: enough to still hold it when the extend arrives; 20 s after: over 10 s is the new ttl.
    Lock lock = a.acquire("java:extend", ttl(Duration.ofSeconds(5)).waitFor(WAIT_LONG).build());
    Duration validity = lock.extend(Duration.ofSeconds(20));
    assertTrue(validity.compareTo(Duration.ofSeconds(10)) > 0, validity.toString());
    assertEquals(validity, lock.validity());
    assertTrue((Long) a.held().get(0).get("validity_ms") > 10_000);
    if (CONTROLLED) assertTrue(controlLong("pttl java:extend") > 10_000);
    Duration again = lock.extendAsync(Duration.ofSeconds(20)).get();
    assertTrue(again.compareTo(Duration.ofSeconds(10)) > 0, again.toString());
  }

  @Test
  void lockWithoutRenewExpiresAndIsReportedLost() throws Exception {
    Client a = client();
    Lock lock = a.acquire("java:expire", ttl(Duration.ofSeconds(1)).waitFor(WAIT_LONG).build());
    CompletableFuture<Lock> heard = new CompletableFuture<>();
    lock.onLost(heard::complete);
    assertEquals(Optional.of("expired"), lock.awaitLost(EVENT_WAIT));
    assertSame(lock, heard.get(EVENT_WAIT.toMillis(), TimeUnit.MILLISECONDS));
    assertTrue(lock.isLost());
    expectCode(ErrorCode.LOST, () -> lock.extend(Duration.ofSeconds(1)));
    expectCode(ErrorCode.LOST, lock::check);
    CompletableFuture<Lock> late = new CompletableFuture<>();
    lock.onLost(late::complete); // lost already: called at once
    assertSame(lock, late.get(EVENT_WAIT.toMillis(), TimeUnit.MILLISECONDS));
    expectCode(ErrorCode.LOST, lock::close); // a loss inside try-with-resources is not silent
    lock.close(); // reported once
  }

  @Test
  void lostWhenRenewalFails() throws Exception {
    Client a = client();
    Lock lock = a.acquire("java:lost",
        ttl(Duration.ofSeconds(2)).waitFor(WAIT_LONG).renew(true).build());
    CompletableFuture<String> listenerThread = new CompletableFuture<>();
    lock.onLost(l -> listenerThread.complete(Thread.currentThread().getName()));
    control("flush"); // the keys vanish: the next renewal finds the lock gone
    assertEquals(Optional.of("renew_failed"), lock.awaitLost(EVENT_WAIT));
    assertTrue(listenerThread.get(EVENT_WAIT.toMillis(), TimeUnit.MILLISECONDS)
        .startsWith("lockwarden-listeners-"));
    assertEquals(List.of(), a.held());
  }

  @Test
  void noQuorumWhenAMajorityOfMastersIsDown() throws Exception {
    Client a = client();
    control("kill-majority");
    LockException e;
    try {
      e = assertThrows(LockException.class, () -> a.acquire("java:quorum",
          ttl(Duration.ofSeconds(1)).waitFor(Duration.ofMillis(100)).build()));
    } finally {
      control("restore");
    }
    assertEquals(ErrorCode.NO_QUORUM, e.code(), e.toString());
    a.acquire("java:quorum", ttl(Duration.ofSeconds(1)).waitFor(WAIT_LONG).build()).release();
  }

  @Test
  void aRenewedLockIsResumedAfterTheAgentRestarts() throws Exception {
    Client a = client();
    Lock lock = a.acquire("java:resume",
        ttl(Duration.ofSeconds(4)).waitFor(WAIT_LONG).renew(true).build());
    CompletableFuture<Lock> heard = new CompletableFuture<>();
    lock.onLost(heard::complete);
    control("restart-agent"); // kill -9: the lock stays on the masters for the next run
    awaitResumed(a, lock);
    assertFalse(a.isClosed());
    // Past the ttl: only the new run's renewals keep it.
    Thread.sleep(4_500);
    assertEquals(5, controlLong("count java:resume"));
    lock.check();
    assertFalse(heard.isDone(), "reported lost");
    lock.release();
    assertEquals(0, controlLong("count java:resume"));
    assertEquals(List.of(), a.held());
    assertFalse(lock.isLost());
  }

  @Test
  void aLockWhoseKeysAreGoneIsReportedLostAfterTheAgentRestarts() throws Exception {
    Client a = client();
    Lock lock = a.acquire("java:resume-gone",
        ttl(Duration.ofSeconds(2)).waitFor(WAIT_LONG).renew(true).build());
    CompletableFuture<Lock> heard = new CompletableFuture<>();
    lock.onLost(heard::complete);
    control("flush"); // the keys vanish...
    control("restart-agent"); // ...and the next run answers the resume not_held
    Optional<String> reason = lock.awaitLost(EVENT_WAIT);
    // renew_failed if the old run noticed first.
    assertTrue(Set.of("agent_lost", "renew_failed").contains(reason.orElse("")),
        reason.toString());
    assertSame(lock, heard.get(EVENT_WAIT.toMillis(), TimeUnit.MILLISECONDS));
    expectCode(ErrorCode.LOST, lock::check);
  }

  @Test
  void closingTheClientReleasesItsLocks() throws Exception {
    Client a = client();
    Client b = client();
    Lock lock = a.acquire("java:close", ttl(Duration.ofSeconds(10)).waitFor(WAIT_LONG).build());
    a.close();
    assertTrue(a.isClosed());
    assertEquals(Optional.of("disconnected"), lock.awaitLost(EVENT_WAIT));
    // Released once the agent has seen the connection end: well before b's wait runs out.
    b.acquire("java:close", ttl(Duration.ofSeconds(1)).waitFor(WAIT_LONG).build());
    expectCode(ErrorCode.DISCONNECTED, a::ping);
    ExecutionException e = assertThrows(ExecutionException.class, () -> a.pingAsync().get());
    assertEquals(ErrorCode.DISCONNECTED, ((LockException) e.getCause()).code());
    a.close(); // again: nothing to do
  }

  @Test
  void cancelledAcquireGivesTheLateGrantBack() throws Exception {
    Client a = client();
    Client b = client();
    Lock holder = a.acquire("java:cancel", ttl(Duration.ofSeconds(10)).waitFor(WAIT_LONG).build());
    // A ttl far longer than a's wait below: only a give-back lets a have it again in time.
    CompletableFuture<Lock> waiting = b.acquireAsync("java:cancel",
        ttl(Duration.ofSeconds(60)).waitFor(Duration.ofSeconds(30)).build());
    waitQueued(a, "java:cancel");
    assertTrue(waiting.cancel(true));
    holder.release(); // b's abandoned request gets the lock, and gives it back
    a.acquire("java:cancel", ttl(Duration.ofSeconds(1)).waitFor(Duration.ofSeconds(5)).build())
        .release();
  }

  @Test
  void interruptedAcquireGivesTheLateGrantBack() throws Exception {
    Client a = client();
    Client b = client();
    Lock holder = a.acquire("java:interrupt",
        ttl(Duration.ofSeconds(10)).waitFor(WAIT_LONG).build());
    CompletableFuture<LockException> failure = new CompletableFuture<>();
    Thread waiter = new Thread(() -> {
      try {
        b.acquire("java:interrupt",
            ttl(Duration.ofSeconds(60)).waitFor(Duration.ofSeconds(30)).build());
        failure.completeExceptionally(new AssertionError("acquired"));
      } catch (LockException e) {
        failure.complete(Thread.currentThread().isInterrupted() ? e : null);
      }
    });
    waiter.start();
    waitQueued(a, "java:interrupt");
    waiter.interrupt();
    LockException e = failure.get(EVENT_WAIT.toMillis(), TimeUnit.MILLISECONDS);
    assertEquals(ErrorCode.INTERRUPTED, e == null ? null : e.code(), "interrupt status kept");
    b.ping(); // an interrupted caller does not end the session
    holder.release();
    a.acquire("java:interrupt",
        ttl(Duration.ofSeconds(1)).waitFor(Duration.ofSeconds(5)).build()).release();
  }

  @Test
  void oneClientServesManyThreads() throws Exception {
    Client a = client();
    List<CompletableFuture<Void>> workers = new java.util.ArrayList<>();
    for (int t = 0; t < 8; t++) {
      String resource = "java:thread-" + t;
      workers.add(CompletableFuture.runAsync(() -> {
        try {
          for (int i = 0; i < 10; i++) {
            Lock l = a.acquire(resource, ttl(Duration.ofSeconds(10)).waitFor(WAIT_LONG).build());
            assertEquals(resource, l.resource());
            a.ping();
            l.release();
          }
        } catch (LockException e) {
          throw new java.util.concurrent.CompletionException(e);
        }
      }, runnable -> new Thread(runnable).start()));
    }
    CompletableFuture.allOf(workers.toArray(new CompletableFuture<?>[0]))
        .get(EVENT_WAIT.toMillis() * 2, TimeUnit.MILLISECONDS);
    assertEquals(List.of(), a.held());
    assertNotEquals(null, a.health().get("quorum"));
  }
}
