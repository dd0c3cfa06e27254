#pragma once
// A small blocking client for the lockwarden socket protocol, used by the CLI, the tests and
// the benchmarks. One Client = one connection = one session on the agent: closing it releases
// every lock it took. Not thread-safe.

#include <chrono>
#include <deque>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace lw::client {

// I/O failure talking to the agent (cannot connect, connection closed, timed out).
class ClientError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Client {
 public:
  // Connects to the agent's Unix socket; throws ClientError when it cannot.
  explicit Client(const std::string& socket_path);
  ~Client();
  Client(Client&& other) noexcept;
  Client& operator=(Client&& other) noexcept;
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  using Ms = std::chrono::milliseconds;
  static constexpr Ms kDefaultTimeout{60'000};

  // Sends `request` (an "id" is assigned when absent) and returns the reply carrying that id.
  // Events and other replies that arrive meanwhile are kept for NextEvent / later calls.
  nlohmann::json Call(nlohmann::json request, Ms timeout = kDefaultTimeout);

  // fence: ask for a fencing token too (the reply's "fence"). ttl_ms <= 0: the agent's default.
  nlohmann::json Acquire(const std::string& resource, int64_t ttl_ms, int64_t wait_ms,
                         bool renew = false, Ms timeout = kDefaultTimeout, bool fence = false);
  // The kind of hold an acquire asks for: permits > 0, a permit of a semaphore of that many;
  // shared, a read hold; neither, an exclusive hold (a mutex, or the write hold).
  struct HoldKind {
    int permits = 0;
    bool shared = false;
    bool election = false;  // a leadership (Resume only: its fence is the term)
  };
  nlohmann::json Acquire(const std::string& resource, int64_t ttl_ms, int64_t wait_ms,
                         HoldKind kind, bool renew = false, Ms timeout = kDefaultTimeout,
                         bool fence = false);
  // Several resources at once, all or none (docs/protocol.md "Several resources at once").
  nlohmann::json AcquireAll(const std::vector<std::string>& resources, int64_t ttl_ms,
                            int64_t wait_ms, HoldKind kind, bool renew = false,
                            Ms timeout = kDefaultTimeout, bool fence = false);
  // Takes over a hold granted through an earlier run of the agent (docs/protocol.md "Resume"):
  // kind as its acquire asked; permit and fence as its grant answered (-1 / 0: none); ttl_ms
  // <= 0: the agent's default.
  nlohmann::json Resume(const std::string& resource, const std::string& token, int64_t ttl_ms,
                        bool renew, HoldKind kind, int permit = -1, int64_t fence = 0,
                        Ms timeout = kDefaultTimeout);
  nlohmann::json Release(const std::string& resource, const std::string& token);
  nlohmann::json Extend(const std::string& resource, const std::string& token, int64_t ttl_ms);
  // Elections (docs/protocol.md "Elections"). ttl_ms <= 0: the agent's default; wait_ms < 0:
  // the agent's max_wait_ms. The campaign's reply comes once elected (or on failure).
  nlohmann::json Campaign(const std::string& name, const std::string& value, int64_t ttl_ms,
                          int64_t wait_ms, Ms timeout = kDefaultTimeout);
  nlohmann::json Resign(const std::string& name, const std::string& token);
  nlohmann::json Leader(const std::string& name);
  // Then `leader` events come through NextEvent.
  nlohmann::json Observe(const std::string& name);
  nlohmann::json Unobserve(const std::string& name);
  nlohmann::json Held();
  nlohmann::json Health();
  nlohmann::json Ping();

  // Next pushed event (a line without "id", e.g. {"event":"lost",...}), waiting up to timeout.
  std::optional<nlohmann::json> NextEvent(Ms timeout);

  // Raw access for protocol tests: write bytes as they are; read the next line as text.
  void SendRaw(const std::string& bytes);
  std::optional<std::string> ReadLine(Ms timeout);

  int fd() const { return fd_; }
  void Close();

 private:
  std::optional<nlohmann::json> ReadMessage(Ms timeout);

  int fd_ = -1;
  int64_t next_id_ = 1;
  std::string inbuf_;
  std::deque<nlohmann::json> pending_;  // received but not yet asked for
};

}  // namespace lw::client
