#include "admin/auth.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace lw {

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = a.size() > b.size() ? a.size() : b.size();
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

namespace {

constexpr std::string_view kBearer = "Bearer ";

// Whether `authorization` is "Bearer <token>", compared in constant time.
bool BearerMatches(std::string_view authorization, const std::string& token) {
  return authorization.starts_with(kBearer) &&
         ConstantTimeEquals(authorization.substr(kBearer.size()), token);
}

}  // namespace

ActionVerdict JudgeAction(const ActionHeaders& h, const std::string& token) {
  if (token.empty()) {
    return {Refusal::kDisabled,
            "admin actions are disabled: set admin_token_file (--admin-token-file) to a file "
            "holding a secret token, then send it as \"Authorization: Bearer <token>\""};
  }
  if (!h.sec_fetch_site.empty() && h.sec_fetch_site != "same-origin" &&
      h.sec_fetch_site != "none") {
    return {Refusal::kCrossSite, "cross-site request refused (Sec-Fetch-Site: " +
                                     h.sec_fetch_site + ")"};
  }
  if (!h.origin.empty() && h.origin != "http://" + h.host && h.origin != "https://" + h.host) {
    return {Refusal::kCrossSite, "cross-origin request refused (Origin " + h.origin +
                                     " is not this server)"};
  }
  if (h.authorization.empty()) {
    return {Refusal::kNoToken, "this action needs the admin token: "
                               "\"Authorization: Bearer <token>\""};
  }
  if (!BearerMatches(h.authorization, token)) return {Refusal::kBadToken, "wrong admin token"};
  return {std::nullopt, {}};
}

ActionVerdict JudgeRead(std::string_view authorization, const std::string& token, ReadScope scope,
                        PathExposure exposure) {
  if (scope == ReadScope::kLoopback || exposure == PathExposure::kOpen) return {std::nullopt, {}};
  if (token.empty()) {
    return {Refusal::kDisabled,
            "this admin listener is reachable beyond this host and no admin token is set: "
            "only /healthz and /readyz answer; set admin_token_file (--admin-token-file)"};
  }
  if (authorization.empty()) {
    return {Refusal::kNoToken,
            "this admin listener is reachable beyond this host: reads need the admin token "
            "(\"Authorization: Bearer <token>\"); /healthz and /readyz need none"};
  }
  if (!BearerMatches(authorization, token)) return {Refusal::kBadToken, "wrong admin token"};
  return {std::nullopt, {}};
}

std::optional<std::string> ReadTokenFile(const std::string& path, std::string& out) {
  struct stat st{};
  if (stat(path.c_str(), &st) != 0) {
    return "admin_token_file " + path + ": " + std::strerror(errno);
  }
  if ((st.st_mode & S_IROTH) != 0) {
    return "admin_token_file " + path + " is readable by everyone; chmod 600 or 640 it";
  }
  std::ifstream in(path);
  if (!in) return "admin_token_file " + path + ": cannot read it";
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string token = buffer.str();
  const size_t first = token.find_first_not_of(" \t\r\n");
  const size_t last = token.find_last_not_of(" \t\r\n");
  if (first == std::string::npos) return "admin_token_file " + path + " is empty";
  token = token.substr(first, last - first + 1);
  if (token.size() < 16) {
    return "admin_token_file " + path + ": the token is " + std::to_string(token.size()) +
           " characters; use at least 16 (e.g. openssl rand -hex 32)";
  }
  out = std::move(token);
  return std::nullopt;
}

}  // namespace lw
