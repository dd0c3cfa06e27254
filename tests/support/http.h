#pragma once
// Tiny blocking HTTP client for tests (cpp-httplib), talking to the agent's admin listener or
// to a Prometheus server. Never throws: a transport failure is status 0 with the error text.

#include <map>
#include <string>

namespace lw::test {

using HttpHeaders = std::multimap<std::string, std::string>;

struct HttpResult {
  int status = 0;            // 0: no HTTP answer (error says why)
  std::string body;
  std::string content_type;
  std::string error;
  HttpHeaders headers;       // as received (names as the server wrote them)

  // The first value of a response header, "" if absent.
  std::string Header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

HttpResult HttpGet(int port, const std::string& path, const HttpHeaders& headers = {});
HttpResult HttpPost(int port, const std::string& path, const std::string& body,
                    const HttpHeaders& headers = {},
                    const std::string& content_type = "application/json");

}  // namespace lw::test
