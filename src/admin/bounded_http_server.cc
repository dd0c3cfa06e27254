#include "admin/bounded_http_server.h"

#include <netdb.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <list>
#include <optional>

#include "admin/views.h"

namespace lw {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// The page polls every second over one keep-alive connection; an idle one gives its worker
// back after this (or within kGiveWayCheck when another connection needs a worker).
constexpr milliseconds kKeepAlive{2000};
// While idle on keep-alive, how often to look whether a connection waits for a worker.
constexpr milliseconds kGiveWayCheck{50};
constexpr size_t kKeepAliveMaxRequests = 100;
constexpr size_t kMinBacklog = 128;
// Request line and headers, at most (httplib bounds each header line only once it has read it).
constexpr size_t kMaxHeadBytes = 64 * 1024;

class ConnectionStream;
// The connection this worker thread is serving (handlers run on the same thread).
thread_local ConnectionStream* t_stream = nullptr;

int PollMs(Clock::duration left) {
  const auto ms = std::chrono::ceil<milliseconds>(left).count();
  return static_cast<int>(std::clamp<int64_t>(ms, 0, 60'000));
}

// The socket side of one connection, for httplib's request parser and response writer. Each
// read and write waits at most until the connection's deadline, which starts over whenever the
// direction changes (a request has been read and the response begins, or the reverse) and when
// the next request on a keep-alive connection is awaited. Once a deadline is missed in the middle
// of a request or response, or a request grows past `max_request_bytes` (request line, headers
// and body: httplib itself bounds neither a header line nor a chunked body), the connection is
// cut: every later read and write fails.
class ConnectionStream final : public httplib::Stream {
 public:
  enum class Cut { kNone, kDeadline, kOversized };

  ConnectionStream(int fd, int stop_fd, milliseconds timeout, Clock::time_point began,
                   size_t max_request_bytes)
      : fd_(fd),
        stop_fd_(stop_fd),
        timeout_(timeout),
        max_request_bytes_(max_request_bytes),
        deadline_(began + timeout),
        request_began_(began.time_since_epoch().count()) {}

  bool is_readable() const override { return begin_ < end_ || Wait(POLLIN); }
  bool is_writable() const override { return Wait(POLLOUT); }

  ssize_t read(char* ptr, size_t size) override {
    if (cut_ != Cut::kNone) return -1;
    if (phase_ == Phase::kWriting) Turn(Phase::kReading);
    while (begin_ == end_) {
      if (!Wait(POLLIN)) return -1;
      const ssize_t n = recv(fd_, buffer_, sizeof buffer_, MSG_DONTWAIT);
      if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
      if (n <= 0) return n;
      begin_ = 0;
      end_ = static_cast<size_t>(n);
      request_bytes_ += end_;
      if (request_bytes_ > max_request_bytes_) {
        cut_ = Cut::kOversized;
        return -1;
      }
    }
    const size_t k = std::min(size, end_ - begin_);
    std::memcpy(ptr, buffer_ + begin_, k);
    begin_ += k;
    return static_cast<ssize_t>(k);
  }

  // All of it or nothing (-1), like a blocking send: httplib does not always retry short writes.
  ssize_t write(const char* ptr, size_t size) override {
    if (cut_ != Cut::kNone) return -1;
    if (phase_ == Phase::kReading) Turn(Phase::kWriting);
    size_t sent = 0;
    while (sent < size) {
      if (!Wait(POLLOUT)) return -1;
      const ssize_t n = send(fd_, ptr + sent, size - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
      if (n < 0) return -1;
      sent += static_cast<size_t>(n);
    }
    return static_cast<ssize_t>(size);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    Address(true, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    Address(false, ip, port);
  }
  socket_t socket() const override { return fd_; }

  // Waits for the first byte of the next request: up to `idle`, the deadline, the stop signal,
  // or (when give_way is set) until another connection waits for a worker. False: close.
  bool AwaitRequest(milliseconds idle, const std::function<bool()>& give_way) {
    if (begin_ < end_) return true;  // pipelined
    const WaitingForClient waiting(*this);
    const auto until = std::min(deadline_, Clock::now() + idle);
    for (;;) {
      auto left = until - Clock::now();
      if (left <= Clock::duration::zero()) return false;
      if (give_way) left = std::min<Clock::duration>(left, kGiveWayCheck);
      pollfd fds[2] = {{fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
      const int r = poll(fds, 2, PollMs(left));
      if (r < 0 && errno != EINTR) return false;
      if (fds[1].revents != 0) return false;
      if (fds[0].revents != 0) return true;  // data, or the peer closed (the read will say)
      if (give_way && give_way()) return false;
    }
  }

  // A response has been sent: the next request on this connection has `timeout` from now.
  void NextRequest() {
    const auto now = Clock::now();
    phase_ = Phase::kReading;
    deadline_ = now + timeout_;
    request_began_ = now.time_since_epoch().count();
    request_bytes_ = end_ - begin_;
  }

  // For other threads (MakeRoom): whether this connection is blocked waiting for its client to
  // send (not running a handler, not sending), and since when its request has been awaited.
  bool waiting_for_client() const { return waiting_for_client_; }
  Clock::time_point request_began() const {
    return Clock::time_point(Clock::duration(request_began_.load()));
  }

  // Why the connection was cut, if it was.
  Cut cut() const { return cut_; }

  // The response being written says "Connection: close": no next request on this connection.
  void CloseAfterResponse() { close_after_response_ = true; }
  bool close_after_response() const { return close_after_response_; }

 private:
  enum class Phase { kReading, kWriting };

  // Marks the stream as waiting for its client for the scope's duration.
  class WaitingForClient {
   public:
    explicit WaitingForClient(const ConnectionStream& s) : s_(s) { s_.waiting_for_client_ = true; }
    ~WaitingForClient() { s_.waiting_for_client_ = false; }

   private:
    const ConnectionStream& s_;
  };

  void Turn(Phase phase) {
    phase_ = phase;
    deadline_ = Clock::now() + timeout_;
  }

  // Until fd_ is ready for `events` (true), or the deadline or the stop signal (false).
  bool Wait(short events) const {
    std::optional<WaitingForClient> waiting;
    if (events == POLLIN) waiting.emplace(*this);
    for (;;) {
      const auto left = deadline_ - Clock::now();
      if (left <= Clock::duration::zero()) {
        // Nothing of a request yet is an idle connection closing, not a refusal.
        if (phase_ == Phase::kWriting || request_bytes_ > 0) cut_ = Cut::kDeadline;
        return false;
      }
      pollfd fds[2] = {{fd_, events, 0}, {stop_fd_, POLLIN, 0}};
      const int r = poll(fds, 2, PollMs(left));
      if (r < 0 && errno != EINTR) return false;
      if (fds[1].revents != 0) return false;
      if (fds[0].revents != 0) return true;  // ready, or an error the recv/send reports
    }
  }

  void Address(bool peer, std::string& ip, int& port) const {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    auto* sa = reinterpret_cast<sockaddr*>(&addr);
    if ((peer ? getpeername(fd_, sa, &len) : getsockname(fd_, sa, &len)) != 0) return;
    char host[NI_MAXHOST];
    char serv[NI_MAXSERV];
    if (getnameinfo(sa, len, host, sizeof host, serv, sizeof serv,
                    NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
      ip = host;
      port = std::atoi(serv);
    }
  }

  const int fd_;
  const int stop_fd_;
  const milliseconds timeout_;
  const size_t max_request_bytes_;
  Clock::time_point deadline_;
  Phase phase_ = Phase::kReading;
  size_t request_bytes_ = 0;  // received since the current request began to be awaited
  mutable Cut cut_ = Cut::kNone;
  bool close_after_response_ = false;
  mutable std::atomic<bool> waiting_for_client_{false};
  std::atomic<Clock::rep> request_began_;
  char buffer_[4096];
  size_t begin_ = 0;
  size_t end_ = 0;
};

// Closing a socket with unread bytes sends a reset, which may destroy the answer before the
// client has read it: drop what has arrived already (never wait for more), then close.
void DrainAndClose(int fd) {
  char sink[4096];
  for (int i = 0; i < 16 && recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0; ++i) {
  }
  close(fd);
}

// How long a request must have been awaited before its connection may be ended to make room
// for a new one: legitimate clients send theirs within a round trip or two.
milliseconds EvictAfter(milliseconds timeout) {
  return std::clamp(timeout / 4, milliseconds(50), milliseconds(1000));
}

std::string ShedAnswer(size_t max_connections) {
  const std::string body =
      ErrorView({ErrorCode::kTooMany, "the admin server already has " +
                                          std::to_string(max_connections) +
                                          " connections (admin_max_connections); retry in a second"})
          .dump();
  return "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nConnection: close\r\n"
         "Content-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

}  // namespace

// The connections being served, for MakeRoom on the accept thread. A connection's fd is
// shut down only under the mutex and while it is listed; its worker unlists it before closing
// it, so an fd number reused by a later connection is never touched.
class BoundedHttpServer::LiveConnections {
 public:
  struct Entry {
    int fd;
    const ConnectionStream* stream;
    bool evicted = false;
  };
  using Handle = std::list<Entry>::iterator;

  Handle Add(int fd, const ConnectionStream* stream) {
    std::lock_guard lock(mu_);
    return entries_.insert(entries_.end(), Entry{fd, stream});
  }

  // Unlists it; whether MakeRoom ended it.
  bool Remove(Handle h) {
    std::lock_guard lock(mu_);
    const bool evicted = h->evicted;
    entries_.erase(h);
    return evicted;
  }

  // Ends the connection that has waited longest, and at least `after`, for its client to send
  // a request (a slow or silent client, or an idle keep-alive one). False if there is none.
  bool EvictLongestWaiting(milliseconds after) {
    std::lock_guard lock(mu_);
    Entry* victim = nullptr;
    auto oldest = Clock::now() - after;
    for (Entry& e : entries_) {
      if (e.evicted || !e.stream->waiting_for_client()) continue;
      const auto began = e.stream->request_began();
      if (began <= oldest) {
        oldest = began;
        victim = &e;
      }
    }
    if (!victim) return false;
    victim->evicted = true;
    ::shutdown(victim->fd, SHUT_RDWR);  // its worker's poll() returns; the read sees the end
    return true;
  }

 private:
  std::mutex mu_;
  std::list<Entry> entries_;
};

// ---------------------------------------------------------------------------- BoundedHttpServer

BoundedHttpServer::BoundedHttpServer(HttpBounds bounds,
                                     std::function<void(AdminRefusal)> on_refusal)
    : bounds_(bounds),
      keep_alive_(std::min(kKeepAlive, bounds.timeout)),
      on_refusal_(std::move(on_refusal)),
      shed_answer_(ShedAnswer(bounds.max_connections)),
      live_(std::make_unique<LiveConnections>()),
      stop_fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  set_payload_max_length(bounds_.max_body_bytes);
  // Our ConnectionStream bounds every wait by the connection's deadline; httplib's own per-read
  // timeouts (SO_RCVTIMEO/SO_SNDTIMEO on each accepted socket) are set to the same value.
  set_read_timeout(bounds_.timeout);
  set_write_timeout(bounds_.timeout);
  set_keep_alive_timeout(
      std::max<time_t>(1, std::chrono::ceil<std::chrono::seconds>(keep_alive_).count()));
  set_keep_alive_max_count(kKeepAliveMaxRequests);
  // A handler or the error handler that answers "Connection: close" (e.g. on 413, where the body
  // was not read) ends the connection after this response.
  set_post_routing_handler([](const httplib::Request&, httplib::Response& res) {
    if (t_stream && res.get_header_value("Connection") == "close") t_stream->CloseAfterResponse();
  });
  // Judged on the headers, before httplib reads a body: it would read a too large one whole (to
  // skip it), and a chunked one without any limit.
  set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (req.has_header("Transfer-Encoding")) {
      res.status = 411;
    } else if (req.get_header_value<uint64_t>("Content-Length") > bounds_.max_body_bytes) {
      res.status = 413;
    } else {
      return gate_ ? gate_(req, res) : HandlerResponse::Unhandled;
    }
    res.set_header("Connection", "close");  // the body is not read
    return HandlerResponse::Handled;
  });
  new_task_queue = [this] {
    auto* queue = new ConnectionQueue(
        HttpWorkersFor(bounds_.max_connections), bounds_.max_connections,
        [this] { return live_->EvictLongestWaiting(EvictAfter(bounds_.timeout)); });
    queue_ = queue;
    return queue;
  };
}

void BoundedHttpServer::SetGate(HandlerWithResponse gate) { gate_ = std::move(gate); }

BoundedHttpServer::~BoundedHttpServer() {
  if (stop_fd_ >= 0) close(stop_fd_);
}

int BoundedHttpServer::Bind(const std::string& host, int port) {
  if (port == 0) {
    port = bind_to_any_port(host);
  } else if (!bind_to_port(host, port)) {
    port = -1;
  }
  // httplib listens with a backlog of 5: a burst of connections (a browser loading the page opens
  // up to 6 at once) overflows it, and the kernel drops SYNs the client retries only after 1 s.
  // Listening again on a listening socket just sets the backlog (Linux). Beyond the bound, the
  // accept loop answers 503 at once anyway.
  if (port > 0) {
    ::listen(svr_sock_, static_cast<int>(std::max<size_t>(kMinBacklog, bounds_.max_connections)));
  }
  return port;
}

bool BoundedHttpServer::Serve() {
  {
    std::lock_guard lock(serve_mu_);
    if (shutdown_) return false;
    serving_ = true;
  }
  const bool ok = listen_after_bind();
  queue_ = nullptr;  // httplib has destroyed it
  serve_returned_ = true;
  return ok;
}

void BoundedHttpServer::Shutdown() {
  bool serving = false;
  {
    std::lock_guard lock(serve_mu_);
    shutdown_ = true;
    serving = serving_;
  }
  if (stop_fd_ >= 0) {
    const uint64_t one = 1;
    (void)!::write(stop_fd_, &one, sizeof one);
  }
  // httplib's stop() does nothing until the accept loop has begun (is_running()), which Serve()
  // starts at once: wait for it rather than leave that loop running.
  const auto give_up = Clock::now() + std::chrono::seconds(2);
  while (serving && !is_running() && !serve_returned_ && Clock::now() < give_up) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  stop();
}

void BoundedHttpServer::Shed(socket_t sock) {
  (void)!send(sock, shed_answer_.data(), shed_answer_.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  ::shutdown(sock, SHUT_WR);
  DrainAndClose(sock);
  if (on_refusal_) on_refusal_(AdminRefusal::kTooManyConnections);
}

bool BoundedHttpServer::process_and_close_socket(socket_t sock) {
  if (ConnectionQueue::ShedNow()) {
    Shed(sock);
    return true;
  }
  // The first request's time runs from the accept: waiting for a worker counts.
  ConnectionStream stream(sock, stop_fd_, bounds_.timeout, ConnectionQueue::EnqueuedAt(),
                          kMaxHeadBytes + bounds_.max_body_bytes);
  t_stream = &stream;
  const LiveConnections::Handle live = live_->Add(sock, &stream);
  const std::function<bool()> give_way = [this] {
    ConnectionQueue* queue = queue_;
    return queue && queue->NeedsWorker();
  };
  bool ok = false;
  for (size_t served = 0; served < kKeepAliveMaxRequests; ++served) {
    if (svr_sock_ == INVALID_SOCKET) break;
    const bool first = served == 0;
    if (!stream.AwaitRequest(first ? bounds_.timeout : keep_alive_,
                             first ? std::function<bool()>() : give_way)) {
      break;
    }
    bool closed = false;
    ok = process_request(stream, served + 1 == kKeepAliveMaxRequests, closed, nullptr);
    if (!ok || closed || stream.cut() != ConnectionStream::Cut::kNone ||
        stream.close_after_response()) {
      break;
    }
    stream.NextRequest();
  }
  t_stream = nullptr;
  if (live_->Remove(live)) {
    if (ConnectionQueue* queue = queue_) queue->EvictionDone();
    if (on_refusal_) on_refusal_(AdminRefusal::kTooManyConnections);
  }
  if (on_refusal_ && stream.cut() == ConnectionStream::Cut::kDeadline) {
    on_refusal_(AdminRefusal::kTimeout);
  }
  if (on_refusal_ && stream.cut() == ConnectionStream::Cut::kOversized) {
    on_refusal_(AdminRefusal::kTooLarge);
  }
  ::shutdown(sock, SHUT_WR);
  DrainAndClose(sock);
  return ok;
}

}  // namespace lw
