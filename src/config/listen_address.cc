// Parsing of the admin listener address.

#include <arpa/inet.h>

#include <charconv>

#include "config/config.h"

namespace lw {

bool IsLoopbackHost(const std::string& host) {
  return host == "localhost" || host == "::1" || host.starts_with("127.");
}

std::variant<std::optional<ListenAddress>, std::string> ParseListenAddress(
    const std::string& text) {
  if (text == "off") return std::optional<ListenAddress>{};
  const std::string example = "expected host:port (e.g. 127.0.0.1:9477, [::1]:9477) or off";
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) return example + ", got \"" + text + "\"";
  std::string host = text.substr(0, colon);
  // inet_pton reads a C string: a host with a NUL (from a TOML "\u0000") would be checked only
  // up to it, and bound to what precedes it. No valid host holds a control byte.
  for (const char c : host) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return "the host holds a control character (byte " + std::to_string(+c) + "); " + example;
    }
  }
  const std::string port_text = text.substr(colon + 1);
  int port = -1;
  const auto [end, ec] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc() || end != port_text.data() + port_text.size() ||
      port < 0 || port > 65535) {
    return "port \"" + port_text + "\" is not a number in 0..65535";
  }
  if (host.front() == '[') {
    if (host.back() != ']') return example + ", got \"" + text + "\"";
    host = host.substr(1, host.size() - 2);
    in6_addr v6{};
    if (inet_pton(AF_INET6, host.c_str(), &v6) != 1) {
      return "\"" + host + "\" is not an IPv6 address";
    }
  } else if (host != "localhost") {
    // A literal, so that binding never waits on DNS and means what the operator sees.
    in_addr v4{};
    if (inet_pton(AF_INET, host.c_str(), &v4) != 1) {
      return "host \"" + host + "\" must be an IPv4 address, [IPv6] or localhost";
    }
  }
  return std::optional<ListenAddress>{ListenAddress{host, port}};
}

std::string LocalUrl(const ListenAddress& address) {
  std::string host = address.host;
  if (host == "0.0.0.0" || host.empty()) host = "127.0.0.1";
  if (host == "::") host = "::1";
  if (host.find(':') != std::string::npos) host = "[" + host + "]";
  return "http://" + host + ":" + std::to_string(address.port);
}

}  // namespace lw
