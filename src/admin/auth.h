#pragma once
// Who may run an admin action: the holder of the admin token, from a same-origin page or a
// non-browser client. Who may read: anyone on a loopback listener; beyond loopback, the holder of
// the token, except for the health probes and the page's own files. Pure logic, no I/O except
// reading the token file.

#include <optional>
#include <string>
#include <string_view>

namespace lw {

// Compares in time that depends on the lengths only, never on where the bytes differ.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

// The request headers the decision needs (empty when absent).
struct ActionHeaders {
  std::string authorization;   // "Bearer <token>"
  std::string sec_fetch_site;  // browsers: same-origin, same-site, cross-site, none
  std::string origin;          // browsers, on POST: scheme://host[:port]
  std::string host;            // Host header
};

enum class Refusal { kDisabled, kNoToken, kBadToken, kCrossSite };
struct ActionVerdict {
  std::optional<Refusal> refusal;  // nullopt: allowed
  std::string message;             // for people, when refused
};

// token empty: actions are disabled. A browser's cross-site request is refused even with the
// right token (a page elsewhere must not drive this one's actions).
ActionVerdict JudgeAction(const ActionHeaders& headers, const std::string& token);

// Whether the admin listener is reachable beyond this host: then reads need the token too.
enum class ReadScope {
  kLoopback,        // bound to 127.0.0.0/8, ::1 or localhost: whoever can connect is on this host
  kBeyondLoopback,  // any other address (0.0.0.0, ::, a LAN address)
};

// What a read path reveals. kOpen: /healthz and /readyz (up or down, and counts) and the page's
// static files (the same in every agent, no state in them). kState: everything else, unknown
// paths included (deny by default).
enum class PathExposure { kOpen, kState };

// A read (any request that is not an action) with its Authorization header ("" when absent).
// Allowed on a loopback listener and for open paths; beyond loopback a state path needs the
// token: kNoToken / kBadToken (401), or kDisabled when no token is configured (fail closed;
// config validation refuses that setup anyway). No same-origin rule: a GET changes nothing, and
// a page elsewhere can neither know the token nor read the answer.
ActionVerdict JudgeRead(std::string_view authorization, const std::string& token, ReadScope scope,
                        PathExposure exposure);

// Reads the token from `path` into `token` (surrounding whitespace trimmed). Refuses an empty
// file, a short token and a file others may read. Returns a human error, or nullopt.
std::optional<std::string> ReadTokenFile(const std::string& path, std::string& token);

}  // namespace lw
