#include "support/http.h"

#include <httplib.h>

namespace lw::test {
namespace {

httplib::Client MakeClient(int port) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(2);
  client.set_read_timeout(10);
  client.set_write_timeout(5);
  return client;
}

HttpResult ToResult(const httplib::Result& result) {
  HttpResult out;
  if (!result) {
    out.error = httplib::to_string(result.error());
    return out;
  }
  out.status = result->status;
  out.body = result->body;
  out.content_type = result->get_header_value("Content-Type");
  out.headers = HttpHeaders(result->headers.begin(), result->headers.end());
  return out;
}

httplib::Headers ToHeaders(const HttpHeaders& headers) {
  return httplib::Headers(headers.begin(), headers.end());
}

}  // namespace

HttpResult HttpGet(int port, const std::string& path, const HttpHeaders& headers) {
  auto client = MakeClient(port);
  return ToResult(client.Get(path, ToHeaders(headers)));
}

HttpResult HttpPost(int port, const std::string& path, const std::string& body,
                    const HttpHeaders& headers, const std::string& content_type) {
  auto client = MakeClient(port);
  return ToResult(client.Post(path, ToHeaders(headers), body, content_type));
}

}  // namespace lw::test
