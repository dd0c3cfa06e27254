#pragma once
// Failure: why a request was not served, as every front (the socket, the admin API, the CLI)
// reports it: a code a program branches on and a message a person acts on.

#include <string>
#include <utility>

#include "core/error_code.h"

namespace lw {

struct Failure {
  ErrorCode code;
  std::string message;
};

// A request whose input was refused (bad_request).
inline Failure BadRequest(std::string message) {
  return {ErrorCode::kBadRequest, std::move(message)};
}

}  // namespace lw
