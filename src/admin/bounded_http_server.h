#pragma once
// BoundedHttpServer: cpp-httplib's Server with the bounds a listener others can reach needs.
//
// httplib 0.11 times out each read on its own, so a client that drips one byte every few seconds
// keeps a worker thread forever; and it queues accepted connections without limit. Here:
//   - at most max_connections connections are being served or waiting for a worker. One more
//     takes the place of the connection that has waited longest (at least timeout / 4, within
//     [50 ms, 1 s]) for its client to send a request, if there is one: a slow, silent or idle
//     client, never one whose request is being handled or answered. Otherwise it is answered at
//     once with 503 (Retry-After: 1, Connection: close) and closed, unread;
//   - a request must arrive whole within `timeout` of the wait for it starting (its accept, or
//     the end of the previous response on a keep-alive connection), and a response must be sent
//     within `timeout` of its first byte; a connection that misses either is closed;
//   - a body larger than max_body_bytes is refused with 413 before it is read, one without a
//     Content-Length (chunked) with 411, and a request whose head and body together grow past
//     64 KiB + max_body_bytes (an endless header line, say) is cut;
//   - every blocking step of a connection is a poll() on its socket and on a stop signal, so
//     Shutdown() ends every connection at once, whatever it is waiting for.
//
// How: httplib::Server's per-connection loop (process_and_close_socket) is private and compiled
// into Debian's libcpp-httplib.so, so it cannot be wrapped; it is replaced by one built on the
// protected process_request() and a Stream of our own (ConnectionStream, in the .cc) that bounds
// each read and write by the connection's deadline. Only the socket loop is ours: parsing,
// routing and the handlers are httplib's.

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "admin/admin_stats.h"
#include "admin/connection_queue.h"
#include "core/defaults.h"

namespace lw {

static_assert(std::string_view(CPPHTTPLIB_VERSION).starts_with("0.11."),
              "BoundedHttpServer replaces httplib::Server's connection loop as of 0.11; check "
              "process_and_close_socket and process_request of the new version");

struct HttpBounds {
  // being served or waiting for a worker
  size_t max_connections = kDefaultAdminMaxConnections;
  // to receive a request; to send a response
  std::chrono::milliseconds timeout{kDefaultAdminTimeoutMs};
  size_t max_body_bytes = kDefaultAdminMaxBodyBytes;  // a larger body gets 413
};

class BoundedHttpServer final : public httplib::Server {
 public:
  // on_refusal(reason) is called, on a server thread, for each connection shed or ended to make
  // room (kTooManyConnections) or cut at its deadline in the middle of a request or response
  // (kTimeout) or past its size (kTooLarge; a 413 or 411 answered by the gate is the error
  // handler's to count). Configures the payload limit, timeouts, keep-alive, the task queue and
  // the pre- and post-routing handlers (a response with "Connection: close" ends its connection):
  // do not replace those; use SetGate.
  BoundedHttpServer(HttpBounds bounds, std::function<void(AdminRefusal)> on_refusal);
  ~BoundedHttpServer() override;

  // Runs after the body-size checks, before the body is read, in place of a pre-routing
  // handler (Handled: the response it set is sent).
  void SetGate(HandlerWithResponse gate);

  // Binds and listens (port 0: any free port); the port, or -1 if it cannot bind. Use it rather
  // than bind_to_port: it also sets a listen backlog that fits a burst of connections.
  int Bind(const std::string& host, int port);

  // listen_after_bind(), remembering that it returned (for Shutdown).
  bool Serve();
  // Ends every connection (their waits return at once), stops listening; Serve() returns once
  // the workers are joined. Safe to call before Serve() has started and more than once.
  void Shutdown();

  const HttpBounds& bounds() const { return bounds_; }

 private:
  bool process_and_close_socket(socket_t sock) override;
  // Answers 503 without reading the request, and closes.
  void Shed(socket_t sock);

  const HttpBounds bounds_;
  const std::chrono::milliseconds keep_alive_;
  const std::function<void(AdminRefusal)> on_refusal_;
  const std::string shed_answer_;
  HandlerWithResponse gate_;
  class LiveConnections;
  std::unique_ptr<LiveConnections> live_;
  int stop_fd_ = -1;                              // eventfd: readable once Shutdown() began
  std::atomic<ConnectionQueue*> queue_{nullptr};  // httplib owns it while Serve() runs
  std::mutex serve_mu_;
  bool serving_ = false;   // Serve() began
  bool shutdown_ = false;  // Shutdown() began: a later Serve() returns at once
  std::atomic<bool> serve_returned_{false};
};

}  // namespace lw
