package io.lockwarden.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.Channels;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The client against a scripted fake agent on a socket of its own: what the real agent cannot be
 * made to do on demand (answer out of order, break the protocol, revoke, flood events). Needs no
 * agent.
 */
@Timeout(30)
class TransportTest {
  private static final long WAIT_S = 15;

  private Path dir;
  private ServerSocketChannel server;
  private Client client;
  private SocketChannel agent;
  private BufferedReader requests;
  private OutputStream replies;

  @BeforeEach
  void start() throws IOException {
    dir = Files.createTempDirectory("lockwarden-java");
    Path socket = dir.resolve("fake.sock");
    server = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
    server.bind(UnixDomainSocketAddress.of(socket));
    client = Client.connect(socket);
    agent = server.accept();
    requests = new BufferedReader(
        new InputStreamReader(Channels.newInputStream(agent), StandardCharsets.UTF_8));
    replies = Channels.newOutputStream(agent);
  }

  @AfterEach
  void stop() throws IOException {
    client.close();
    agent.close();
    server.close();
    Files.deleteIfExists(dir.resolve("fake.sock"));
    Files.delete(dir);
  }

  /** The next request line the client sent, parsed. */
  @SuppressWarnings("unchecked")
  private Map<String, Object> request() throws Exception {
    String line = requests.readLine();
    return (Map<String, Object>) Json.parse(line);
  }

  private void send(String line) throws IOException {
    replies.write((line + "\n").getBytes(StandardCharsets.UTF_8));
  }

  private static LockException failure(CompletableFuture<?> f) throws Exception {
    ExecutionException e = assertThrows(ExecutionException.class, () -> f.get(WAIT_S,
        TimeUnit.SECONDS));
    return (LockException) e.getCause();
  }

  @Test
  void repliesAreMatchedByIdWhateverTheirOrder() throws Exception {
    CompletableFuture<Map<String, Object>> first = client.requestAsync("health", Map.of());
    CompletableFuture<Map<String, Object>> second = client.requestAsync("locks", Map.of());
    Map<String, Object> r1 = request();
    Map<String, Object> r2 = request();
    assertEquals("health", r1.get("op"));
    assertEquals("locks", r2.get("op"));
    assertTrue(!r1.get("id").equals(r2.get("id")), "two requests in flight share an id");
    send("{\"id\":" + r2.get("id") + ",\"ok\":true,\"locks\":[]}"); // the later one first
    send("{\"id\":" + r1.get("id") + ",\"ok\":true,\"quorum\":3}");
    assertEquals(3L, first.get(WAIT_S, TimeUnit.SECONDS).get("quorum"));
    assertTrue(second.get(WAIT_S, TimeUnit.SECONDS).containsKey("locks"));
  }

  /** A lock on {@code resource} granted with {@code token} ({@code extra}: more reply fields). */
  private Lock granted(String resource, String token, String extra) throws Exception {
    CompletableFuture<Lock> acquiring = client.acquireAsync(resource, AcquireOptions.defaults());
    Map<String, Object> req = request();
    assertEquals("acquire", req.get("op"));
    send("{\"id\":" + req.get("id") + ",\"ok\":true,\"resource\":\"" + resource
        + "\",\"token\":\"" + token + "\",\"validity_ms\":29000,\"waited_ms\":0" + extra + "}");
    return acquiring.get(WAIT_S, TimeUnit.SECONDS);
  }

  /** Answers the next request, which must be {@code op}, with {@code fields} after the id. */
  private void answer(String op, String fields) throws Exception {
    Map<String, Object> req = request();
    assertEquals(op, req.get("op"));
    send("{\"id\":" + req.get("id") + "," + fields + "}");
  }

  /** Returns once the client has read every line sent before (a ping's reply comes after). */
  private void sync() throws Exception {
    CompletableFuture<Void> ping = client.pingAsync();
    answer("ping", "\"ok\":true");
    ping.get(WAIT_S, TimeUnit.SECONDS);
  }

  @Test
  void theAgentsLostEventEndsTheLock() throws Exception {
    String token = "ab".repeat(20);
    Lock lock = granted("r", token, ",\"mode\":\"permit\",\"permit\":3");
    assertEquals(Mode.PERMIT, lock.mode());
    assertEquals(3, lock.permit().getAsInt());
    send("{\"event\":\"lost\",\"resource\":\"r\",\"token\":\"" + "cd".repeat(20)
        + "\",\"reason\":\"revoked\"}"); // another lock's: not this one
    send("{\"event\":\"someday\",\"x\":1}"); // an event this client does not know
    send("{\"event\":\"lost\",\"resource\":\"r\",\"token\":\"" + token
        + "\",\"reason\":\"revoked\"}");
    assertEquals(Optional.of("revoked"), lock.awaitLost(Duration.ofSeconds(WAIT_S)));
    lock.release(); // lost: nothing to send, so the next line is the ping
    sync();
  }

  @Test
  void aReleaseAnsweredNotHeldMarksTheLockLost() throws Exception {
    String token = "ab".repeat(20);
    Lock lock = granted("r", token, "");
    CountDownLatch lost = new CountDownLatch(1);
    lock.onLost(l -> lost.countDown());
    CompletableFuture<LockException> releasing = CompletableFuture.supplyAsync(
        () -> assertThrows(LockException.class, lock::release));
    answer("release", "\"ok\":false,\"error\":\"not_held\",\"message\":\"gone\"");
    assertEquals(ErrorCode.NOT_HELD, releasing.get(WAIT_S, TimeUnit.SECONDS).code());
    assertTrue(lock.isLost());
    assertEquals(Optional.of("not_held"), lock.awaitLost(Duration.ofSeconds(WAIT_S)));
    assertTrue(lost.await(WAIT_S, TimeUnit.SECONDS), "the onLost listener did not run");
    // The agent's lost event, behind the reply, changes nothing more.
    send("{\"event\":\"lost\",\"resource\":\"r\",\"token\":\"" + token
        + "\",\"reason\":\"expired\"}");
    sync();
    assertEquals(Optional.of("not_held"), lock.lostReason());
    LockException closing = assertThrows(LockException.class, lock::close);
    assertEquals(ErrorCode.LOST, closing.code());

    Lock other = granted("s", "cd".repeat(20), "");
    CompletableFuture<Void> async = other.releaseAsync();
    answer("release", "\"ok\":false,\"error\":\"not_held\",\"message\":\"gone\"");
    assertEquals(ErrorCode.NOT_HELD, failure(async).code());
    assertEquals(Optional.of("not_held"), other.lostReason());
  }

  @Test
  void anInterruptedReleaseIsSettledByItsReply() throws Exception {
    Lock lock = granted("r", "ab".repeat(20), "");
    CompletableFuture<LockException> failed = new CompletableFuture<>();
    Thread releaser = new Thread(() -> failed.complete(assertThrows(LockException.class,
        lock::release)));
    releaser.start();
    Map<String, Object> release = request(); // on the wire: only its reply can settle the lock
    assertEquals("release", release.get("op"));
    releaser.interrupt();
    assertEquals(ErrorCode.INTERRUPTED, failed.get(WAIT_S, TimeUnit.SECONDS).code());
    assertTrue(lock.toString().contains("releasing"), lock.toString());
    CompletableFuture<Void> again = lock.releaseAsync(); // the same release: nothing more sent
    CompletableFuture<Void> ping = client.pingAsync();
    Map<String, Object> next = request();
    assertEquals("ping", next.get("op"));
    assertFalse(again.isDone());
    send("{\"id\":" + release.get("id") + ",\"ok\":true}");
    send("{\"id\":" + next.get("id") + ",\"ok\":true}");
    again.get(WAIT_S, TimeUnit.SECONDS);
    ping.get(WAIT_S, TimeUnit.SECONDS);
    assertFalse(lock.isLost());
    lock.close(); // released: nothing to send or throw
    sync();
  }

  @Test
  void anUnreadableLineEndsTheConnection() throws Exception {
    CompletableFuture<Void> ping = client.pingAsync();
    request();
    send("{\"id\":1,\"ok\":true,}");
    LockException e = failure(ping);
    assertEquals(ErrorCode.DISCONNECTED, e.code());
    assertTrue(e.agentMessage().contains("invalid JSON"), e.agentMessage());
    assertTrue(client.isClosed());
  }

  @Test
  void anUnaskedErrorSaysWhyTheAgentClosed() throws Exception {
    CompletableFuture<Void> ping = client.pingAsync();
    request();
    send("{\"id\":null,\"ok\":false,\"error\":\"too_many\",\"message\":\"max_connections (1)\"}");
    agent.close();
    LockException e = failure(ping);
    assertEquals(ErrorCode.DISCONNECTED, e.code());
    assertTrue(e.agentMessage().contains("too_many: max_connections"), e.agentMessage());
  }

  @Test
  void aSlowObserverIsToldItMissedEvents() throws Exception {
    CompletableFuture<Observation> observing = client.observeAsync("e");
    Map<String, Object> req = request();
    send("{\"id\":" + req.get("id") + ",\"ok\":true,\"name\":\"e\",\"leader\":null}");
    Observation obs = observing.get(WAIT_S, TimeUnit.SECONDS);
    assertFalse(obs.term().isPresent());
    int sent = Observation.QUEUED + 2;
    for (int term = 1; term <= sent; term++) {
      send("{\"event\":\"leader\",\"name\":\"e\",\"leader\":{\"value\":\"v" + term
          + "\",\"agent\":\"a\",\"host\":\"h\",\"pid\":1,\"since\":2,\"term\":" + term
          + "},\"term\":" + term + ",\"missed\":false}");
    }
    CompletableFuture<Void> ping = client.pingAsync(); // answered after the events: all read
    send("{\"id\":" + request().get("id") + ",\"ok\":true}");
    ping.get(WAIT_S, TimeUnit.SECONDS);
    assertEquals(sent, obs.term().getAsLong());
    LeaderEvent oldest = obs.next(Duration.ofSeconds(WAIT_S)).orElseThrow();
    assertEquals(3, oldest.term()); // terms 1 and 2 were dropped
    assertTrue(oldest.missed());
    LeaderEvent after = obs.next(Duration.ofSeconds(WAIT_S)).orElseThrow();
    assertEquals(4, after.term());
    assertFalse(after.missed());
    assertEquals(Optional.of("v" + sent), obs.leader().map(Leader::value));
  }

  /** An agent that cannot be reached: the error names the socket tried. */
  @Test
  void anUnreachableAgentsErrorNamesTheSocket() {
    Path nowhere = dir.resolve("no-agent.sock");
    AgentUnreachableException e =
        assertThrows(AgentUnreachableException.class, () -> Client.connect(nowhere));
    assertEquals(nowhere, e.socketPath());
    String want = "cannot connect to the lockwarden agent at " + nowhere + ": ";
    assertTrue(e.getMessage().startsWith(want), e.getMessage());
  }
}
