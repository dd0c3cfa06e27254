#pragma once
// A decoded request written out as JSON, every field of its op included, for the messages of
// tests that compare two decodes (unit tests and the protocol fuzz target; header-only, so the
// fuzz build needs no test library).

#include <nlohmann/json.hpp>
#include <string>
#include <variant>

#include "protocol/messages.h"

namespace lw::test {

inline nlohmann::json RequestJson(const protocol::Request& request) {
  nlohmann::json out = {{"id", request.id}, {"op", std::string(protocol::OpName(request.op))}};
  if (request.id.is_number_unsigned()) out["id_unsigned"] = true;  // decoders store ids signed
  std::visit(
      [&](const auto& op) {
        if constexpr (requires { op.resource; }) out["resource"] = op.resource;
        if constexpr (requires { op.name; }) out["name"] = op.name;
        if constexpr (requires { op.token; }) out["token"] = op.token;
        if constexpr (requires { op.value; }) out["value"] = op.value;
        if constexpr (requires { op.ttl_ms; }) out["ttl_ms"] = op.ttl_ms;
        if constexpr (requires { op.wait_ms; }) out["wait_ms"] = op.wait_ms;
        if constexpr (requires { op.detach; }) {
          out.update({{"renew", op.renew},
                      {"fence", op.fence},
                      {"permits", op.permits},
                      {"shared", op.shared},
                      {"detach", op.detach}});
        }
      },
      request.op);
  return out;
}

// The same as one line of text; bytes that are not UTF-8 are replaced.
inline std::string RequestText(const protocol::Request& request) {
  return RequestJson(request).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Two decodes agree: equal requests, and ids of the same JSON type (an integer id is always
// stored signed, so that it is written back exactly as sent).
inline bool SameRequest(const protocol::Request& a, const protocol::Request& b) {
  return a == b && a.id.type() == b.id.type();
}

}  // namespace lw::test
