// Parsing of master URLs: redis://[user[:password]@]host[:port], and rediss:// for TLS.
// Every error names the URL with its credentials masked, so a message can be logged as is.

#include <arpa/inet.h>

#include <cctype>
#include <charconv>
#include <string_view>

#include "config/config.h"

namespace lw {
namespace {

constexpr std::string_view kScheme = "redis://";
constexpr std::string_view kTlsScheme = "rediss://";
constexpr size_t kMaxHostBytes = 253;  // longest DNS name

std::string Lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Returns url with the credentials replaced by "***": the user is kept, the password never.
// The credentials end at the LAST '@' so that a password holding '@', '/' or '?' is masked
// whole; the parser below splits at the same place, so what it reads is what is masked.
std::string MaskCredentials(const std::string& url) {
  const size_t scheme_end = url.find("://");
  const size_t start = scheme_end == std::string::npos ? 0 : scheme_end + 3;
  const size_t at = url.rfind('@');
  if (at == std::string::npos || at < start) return url;
  const std::string_view userinfo = std::string_view(url).substr(start, at - start);
  const size_t colon = userinfo.find(':');
  const std::string user =
      colon == std::string_view::npos ? "" : std::string(userinfo.substr(0, colon)) + ":";
  return url.substr(0, start) + user + "***" + url.substr(at);
}

bool IsHostnameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_';
}

// Splits "user:password", ":password" or "user" (its password then comes from the agent-wide
// setting: config/load.cc) into the address. Returns a reason on failure.
std::optional<std::string> ParseCredentials(std::string_view userinfo, MasterAddress& address) {
  const size_t colon = userinfo.find(':');
  if (colon == std::string_view::npos) {
    if (userinfo.empty()) return "the user before '@' is empty";
    address.user = std::string(userinfo);
    return std::nullopt;
  }
  address.user = std::string(userinfo.substr(0, colon));
  address.password = std::string(userinfo.substr(colon + 1));
  if (address.password.empty()) return "the password after ':' is empty";
  return std::nullopt;
}

std::optional<std::string> ParsePort(std::string_view text, int& port) {
  if (text.empty()) return "the port after ':' is empty";
  for (char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c))) {
      return "port \"" + std::string(text) + "\" is not a number";
    }
  }
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 1 || value > 65535) {
    return "port " + std::string(text) + " is out of range 1..65535";
  }
  port = value;
  return std::nullopt;
}

// Parses "host", "host:port", "[v6]" or "[v6]:port" into the address.
std::optional<std::string> ParseHostPort(std::string_view text, MasterAddress& address) {
  std::string_view port_text;
  bool has_port = false;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos) return "'[' of an IPv6 address is not closed by ']'";
    address.host = std::string(text.substr(1, close - 1));
    // inet_pton reads a C string: it would stop at a NUL and accept what precedes it.
    if (address.host.find('\0') != std::string::npos) return "the host contains a NUL byte";
    in6_addr ignored;
    if (inet_pton(AF_INET6, address.host.c_str(), &ignored) != 1) {
      return "\"" + address.host + "\" in brackets is not an IPv6 address";
    }
    const std::string_view rest = text.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') return "unexpected text after ']'";
    has_port = !rest.empty();
    if (has_port) port_text = rest.substr(1);
  } else {
    const size_t colon = text.find(':');
    if (colon != std::string_view::npos && text.find(':', colon + 1) != std::string_view::npos) {
      return "an IPv6 address must be in brackets, e.g. redis://[::1]:6379";
    }
    address.host = std::string(text.substr(0, colon));
    has_port = colon != std::string_view::npos;
    if (has_port) port_text = text.substr(colon + 1);
    if (address.host.size() > kMaxHostBytes) return "the host name is too long";
    for (char c : address.host) {
      if (!IsHostnameChar(c)) return "the host contains an invalid character";
    }
  }
  if (address.host.empty()) return "the host is missing";
  if (has_port) return ParsePort(port_text, address.port);
  return std::nullopt;
}

// Parses what follows redis:// or rediss://. Returns the reason on failure.
std::optional<std::string> ParseAfterScheme(std::string_view rest, MasterAddress& address) {
  const size_t at = rest.rfind('@');
  if (at != std::string_view::npos) {
    if (auto reason = ParseCredentials(rest.substr(0, at), address)) return reason;
    rest = rest.substr(at + 1);
  }
  const size_t authority_end = rest.find_first_of("/?#");
  if (authority_end != std::string_view::npos) {
    const std::string_view tail = rest.substr(authority_end);
    if (tail != "/") {
      return "paths, database numbers and options (\"" + std::string(tail) +
             "\") are not supported; locks always live in database 0";
    }
    rest = rest.substr(0, authority_end);
  }
  return ParseHostPort(rest, address);
}

}  // namespace

std::variant<MasterAddress, std::string> ParseMasterUrl(const std::string& url) {
  const std::string shown = "master URL \"" + MaskCredentials(url) + "\": ";
  if (url.empty()) return std::string("master URL is empty; expected redis://host:port");
  const std::string lower = Lower(url);
  MasterAddress address;
  size_t scheme = 0;
  if (lower.starts_with(kTlsScheme)) {
    address.tls.enabled = true;
    scheme = kTlsScheme.size();
  } else if (lower.starts_with(kScheme)) {
    scheme = kScheme.size();
  } else {
    return shown + "must start with redis:// (or rediss:// for TLS), e.g. redis://127.0.0.1:6379";
  }
  if (auto reason = ParseAfterScheme(std::string_view(url).substr(scheme), address)) {
    return shown + *reason;
  }
  return address;
}

}  // namespace lw
