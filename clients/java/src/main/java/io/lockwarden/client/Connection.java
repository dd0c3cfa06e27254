package io.lockwarden.client;

import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;

/**
 * One connection to the agent: the socket, its threads, the requests awaiting replies and what
 * the agent pushes events for. A {@link Client} has one at a time: a new one when it resumes its
 * locks after the connection ended unexpectedly.
 *
 * <p>Threads: a reader reads every line, hands each reply to the request with its id and
 * applies events; it never runs user code. A writer writes the queued request lines, so that a
 * caller never touches the socket (an interrupted caller would close the channel, and with it
 * the session). The client's listener thread runs the {@code lost} and {@code leader} listeners
 * one at a time, in the order the lines came. Futures handed to users are completed on {@link
 * #ASYNC}, never on the reader or the listener thread.
 *
 * <p>Each request has two futures. {@link Pending#result} is internal, completed by the reader,
 * and what blocking calls wait on. A public future (from {@link #async}) follows it. Whoever
 * abandons a request (a cancelled public future, an interrupted blocking call) completes {@code
 * result} exceptionally first; a grant that arrives after that is given back by the reader.
 */
final class Connection {
  /** Longest line accepted from the agent (a {@code locks} reply of many locks is long). */
  static final int MAX_LINE_BYTES = 16 << 20;
  /** Where public futures are completed: the executor CompletableFuture's async methods use. */
  static final Executor ASYNC = new CompletableFuture<Void>().defaultExecutor();

  private static final ByteBuffer STOP = ByteBuffer.allocate(0); // the writer's end, by identity
  static final AtomicInteger SERIAL = new AtomicInteger(); // numbers the threads' names

  /** Turns a successful reply into the request's result; runs on the reader thread. */
  @FunctionalInterface
  interface Decoder<T> {
    T decode(Map<String, Object> reply) throws Wire.ProtocolException;
  }

  /** A request sent and not yet answered. */
  static final class Pending<T> {
    final String op;
    final Decoder<T> decoder;
    final CompletableFuture<T> result = new CompletableFuture<>();

    Pending(String op, Decoder<T> decoder) {
      this.op = op;
      this.decoder = decoder;
    }
  }

  final Path path;
  private final Client owner;
  private final SocketChannel channel;
  private final Thread reader;
  private final Thread writer;
  private final BlockingQueue<ByteBuffer> outbox = new LinkedBlockingQueue<>();

  private final Object mu = new Object(); // guards everything below
  private long nextId;
  private final Map<Long, Pending<?>> pending = new HashMap<>();
  private final Map<String, Lock> locks = new HashMap<>(); // by token; not detached leases
  private final Map<String, Observation> observations = new HashMap<>(); // by election name
  private String closedReason; // set once no request can be sent any more
  private String unasked; // an error line with a null id (too_many before the agent closes)

  private Connection(Path path, Client owner, SocketChannel channel) {
    this.path = path;
    this.owner = owner;
    this.channel = channel;
    int n = SERIAL.incrementAndGet();
    reader = daemon(this::readLoop, "lockwarden-reader-" + n);
    writer = daemon(this::writeLoop, "lockwarden-writer-" + n);
  }

  /**
   * Connects to {@code path} for {@code owner}, which hears of its end ({@link
   * Client#connectionEnded}). Requests may be sent at once; nothing is read or written before
   * {@link #start()}.
   */
  static Connection open(Path path, Client owner) throws IOException {
    SocketChannel channel = SocketChannel.open(StandardProtocolFamily.UNIX);
    try {
      channel.connect(UnixDomainSocketAddress.of(path));
    } catch (IOException e) {
      channel.close();
      throw new AgentUnreachableException(path, e);
    } catch (RuntimeException e) {
      channel.close();
      throw e;
    }
    return new Connection(path, owner, channel);
  }

  /** Starts the reader and the writer (once the owner has made this its connection). */
  void start() {
    reader.start();
    writer.start();
  }

  static Thread daemon(Runnable r, String name) {
    Thread t = new Thread(r, name);
    t.setDaemon(true);
    return t;
  }

  /** Sends a request; its {@code result} fails with DISCONNECTED if the connection is gone. */
  <T> Pending<T> send(String op, Map<String, ?> fields, Decoder<T> decoder) {
    if (fields.containsKey("id") || fields.containsKey("op")) {
      throw new IllegalArgumentException("\"id\" and \"op\" are set by the client");
    }
    Pending<T> p = new Pending<>(op, decoder);
    synchronized (mu) {
      if (closedReason != null) {
        p.result.completeExceptionally(disconnected(closedReason));
        return p;
      }
      Map<String, Object> line = new LinkedHashMap<>();
      line.put("id", ++nextId);
      line.put("op", op);
      line.putAll(fields);
      byte[] bytes = (Json.write(line) + "\n").getBytes(StandardCharsets.UTF_8);
      pending.put(nextId, p);
      outbox.add(ByteBuffer.wrap(bytes));
    }
    return p;
  }

  /** Waits for the reply; interrupted, abandons the request (a late grant is given back). */
  <T> T await(Pending<T> p) throws LockException {
    try {
      return p.result.get();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      if (!p.result.completeExceptionally(new CancellationException("interrupted"))
          && !p.result.isCompletedExceptionally()) {
        giveBack(p.result.join()); // answered meanwhile: nobody takes it now
      }
      throw new LockException(ErrorCode.INTERRUPTED,
          "interrupted while waiting for the reply to " + p.op);
    } catch (ExecutionException e) {
      throw rethrown(e.getCause());
    }
  }

  /** The public future of a request: cancelling it (or failing it) abandons the request. */
  <T> CompletableFuture<T> async(Pending<T> p) {
    CompletableFuture<T> pub = follow(p.result, this::giveBack);
    pub.whenComplete((value, error) -> {
      if (error != null) p.result.completeExceptionally(new CancellationException("abandoned"));
    });
    return pub;
  }

  /**
   * A public future that takes the outcome of {@code internal} on {@link #ASYNC}; completing
   * it first leaves {@code internal} alone, and a value it then refuses goes to {@code
   * untaken} (if not null).
   */
  static <T> CompletableFuture<T> follow(CompletableFuture<T> internal, Consumer<T> untaken) {
    CompletableFuture<T> pub = new CompletableFuture<>();
    internal.whenCompleteAsync((value, error) -> {
      if (error != null) {
        pub.completeExceptionally(error instanceof CompletionException ? error.getCause() : error);
      } else if (!pub.complete(value) && untaken != null) {
        untaken.accept(value);
      }
    }, ASYNC);
    return pub;
  }

  /** A failure of a blocking call, thrown in the caller's thread. */
  static LockException rethrown(Throwable cause) {
    if (cause instanceof LockException) {
      LockException e = (LockException) cause;
      return new LockException(e.rawCode(), e.agentMessage());
    }
    if (cause instanceof RuntimeException) throw (RuntimeException) cause;
    if (cause instanceof Error) throw (Error) cause;
    throw new IllegalStateException(cause);
  }

  /** Ends a result nobody will take: releases a grant, resigns, stops observing. */
  void giveBack(Object result) {
    if (result instanceof Lock) {
      ((Lock) result).giveBack();
    } else if (result instanceof Observation) {
      ((Observation) result).giveBack();
    }
  }

  void register(Lock lock) {
    synchronized (mu) {
      locks.put(lock.token(), lock);
    }
  }

  /** Stops routing events to {@code lock}; returns whether it was routed here. */
  boolean forget(Lock lock) {
    synchronized (mu) {
      return locks.remove(lock.token(), lock);
    }
  }

  /** The lock of {@code token} that this connection holds, or null. */
  Lock lock(String token) {
    synchronized (mu) {
      return locks.get(token);
    }
  }

  /** The locks this connection holds (leaderships too; detached leases are nobody's). */
  List<Lock> locks() {
    synchronized (mu) {
      return new ArrayList<>(locks.values());
    }
  }

  /** Makes {@code o} the observation of its name; returns the one it replaces, if any. */
  Observation register(Observation o) {
    synchronized (mu) {
      return observations.put(o.name(), o);
    }
  }

  /** Stops routing events of {@code name} (to {@code o} only, unless it is null). */
  Observation forget(String name, Observation o) {
    synchronized (mu) {
      if (o != null) return observations.remove(name, o) ? o : null;
      return observations.remove(name);
    }
  }

  boolean isClosed() {
    synchronized (mu) {
      return closedReason != null;
    }
  }

  /** Closes the socket and waits for the reader and writer to end (not from inside them). */
  void close() {
    synchronized (mu) {
      if (closedReason == null) closedReason = "the client was closed";
    }
    try {
      channel.close();
    } catch (IOException e) {
      // closed all the same
    }
    for (Thread t : new Thread[] {reader, writer}) {
      if (t == Thread.currentThread()) continue;
      boolean interrupted = false;
      for (;;) {
        try {
          t.join();
          break;
        } catch (InterruptedException e) {
          interrupted = true; // the threads end promptly once the channel is closed
        }
      }
      if (interrupted) Thread.currentThread().interrupt();
    }
  }

  private static LockException disconnected(String reason) {
    return new LockException(ErrorCode.DISCONNECTED, reason);
  }

  private void writeLoop() {
    try {
      for (;;) {
        ByteBuffer line = outbox.take();
        if (line == STOP) return;
        while (line.hasRemaining()) channel.write(line);
      }
    } catch (InterruptedException | IOException e) {
      try {
        channel.close(); // the reader sees it and ends the connection
      } catch (IOException ignored) {
        // closed all the same
      }
    }
  }

  private void readLoop() {
    String reason = "the agent closed the connection";
    ByteBuffer buffer = ByteBuffer.allocate(64 * 1024);
    byte[] line = new byte[8 * 1024];
    int length = 0;
    try {
      for (;;) {
        buffer.clear();
        int n = channel.read(buffer);
        if (n < 0) break;
        byte[] data = buffer.array();
        int start = 0;
        for (int i = 0; i < n; i++) {
          if (data[i] != '\n') continue;
          line = append(line, length, data, start, i - start);
          length += i - start;
          handle(line, length);
          length = 0;
          start = i + 1;
        }
        line = append(line, length, data, start, n - start);
        length += n - start;
      }
    } catch (IOException e) {
      reason = "connection to the agent failed: " + e;
    } catch (Wire.ProtocolException e) {
      reason = "the agent broke the protocol: " + e.getMessage();
    } finally {
      shutdown(reason);
    }
  }

  private static byte[] append(byte[] line, int length, byte[] data, int from, int count)
      throws Wire.ProtocolException {
    if (length + count > MAX_LINE_BYTES) {
      throw new Wire.ProtocolException("a line longer than " + MAX_LINE_BYTES + " bytes");
    }
    if (length + count > line.length) {
      line = Arrays.copyOf(line, Math.max(length + count, line.length * 2));
    }
    System.arraycopy(data, from, line, length, count);
    return line;
  }

  @SuppressWarnings("unchecked")
  private void handle(byte[] line, int length) throws Wire.ProtocolException {
    Object value;
    try {
      value = Json.parse(line, 0, length);
    } catch (Json.ParseException e) {
      throw new Wire.ProtocolException("invalid JSON (" + e.getMessage() + ")");
    }
    if (!(value instanceof Map)) throw new Wire.ProtocolException("a line that is not an object");
    dispatch((Map<String, Object>) value);
  }

  private void dispatch(Map<String, Object> msg) throws Wire.ProtocolException {
    if (msg.containsKey("event")) {
      String event = Wire.string(msg, "event");
      if (event.equals("lost")) {
        Lock lock;
        synchronized (mu) {
          lock = locks.remove(Wire.string(msg, "token"));
        }
        if (lock != null) lock.markLost(Wire.string(msg, "reason"));
      } else if (event.equals("leader")) {
        LeaderEvent e = LeaderEvent.fromWire(msg);
        Observation o;
        synchronized (mu) {
          o = observations.get(e.name());
        }
        if (o != null) o.push(e);
      } // an event of a newer agent is not for this client
      return;
    }
    boolean ok = Wire.bool(msg, "ok");
    Object id = msg.get("id");
    if (id == null) {
      if (!ok) unasked = Wire.string(msg, "error") + ": " + Wire.string(msg, "message");
      return;
    }
    Pending<?> p;
    synchronized (mu) {
      p = pending.remove(id);
    }
    if (p == null) throw new Wire.ProtocolException("a reply to no request (id " + id + ")");
    if (!ok) {
      p.result.completeExceptionally(
          new LockException(Wire.string(msg, "error"), Wire.string(msg, "message")));
      return;
    }
    finish(p, msg);
  }

  private <T> void finish(Pending<T> p, Map<String, Object> reply) throws Wire.ProtocolException {
    T value;
    try {
      value = p.decoder.decode(reply); // registers locks and observations before the next line
    } catch (Wire.ProtocolException | RuntimeException e) {
      p.result.completeExceptionally(disconnected("unreadable reply: " + e.getMessage()));
      throw e instanceof Wire.ProtocolException ? (Wire.ProtocolException) e
          : new Wire.ProtocolException(e.toString());
    }
    if (!p.result.complete(value)) giveBack(value); // abandoned by its caller
  }

  private void shutdown(String reason) {
    List<Pending<?>> failed;
    List<Lock> lost;
    List<Observation> ended;
    String why;
    boolean unexpected; // not the client's own close
    synchronized (mu) {
      unexpected = closedReason == null;
      if (closedReason == null) closedReason = unasked != null ? unasked : reason;
      why = closedReason;
      failed = new ArrayList<>(pending.values());
      lost = new ArrayList<>(locks.values());
      ended = new ArrayList<>(observations.values());
      pending.clear();
      locks.clear();
      observations.clear();
      outbox.clear();
      outbox.add(STOP);
    }
    try {
      channel.close();
    } catch (IOException e) {
      // closed all the same
    }
    // First the owner takes the locks it resumes (held, not being released: a release on the
    // wire fails below and marks its lock lost), then the rest ends as it always did.
    if (unexpected) lost = owner.connectionEnded(this, lost);
    for (Pending<?> p : failed) p.result.completeExceptionally(disconnected(why));
    for (Lock l : lost) l.markLost(ErrorCode.DISCONNECTED.wireName());
    for (Observation o : ended) o.end(ErrorCode.DISCONNECTED, why);
    owner.connectionDone();
  }
}
