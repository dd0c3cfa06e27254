#pragma once
// Who may run an admin action: the holder of the admin token, from a same-origin page or a
// non-browser client. Pure logic, no I/O except reading the token file.

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

// Reads the token from `path` into `token` (surrounding whitespace trimmed). Refuses an empty
// file, a short token and a file others may read. Returns a human error, or nullopt.
std::optional<std::string> ReadTokenFile(const std::string& path, std::string& token);

}  // namespace lw
