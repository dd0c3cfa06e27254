#pragma once
// Decoding helpers shared by the protocol's unit tests: decode a line that must be accepted (as
// a given op) or refused, with what holds for every refusal checked.

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <variant>

#include "protocol/messages.h"

namespace lw::protocol::decode_helpers {

using nlohmann::json;

inline const Limits kLimits;  // the defaults: ttl 100..60000 (30000), wait 0..300000
inline const std::string kToken = "0123456789abcdef0123456789abcdef01234567";

inline Request MustDecode(std::string_view line, const Limits& limits = kLimits) {
  auto result = DecodeRequest(line, limits);
  if (const auto* error = std::get_if<DecodeError>(&result)) {
    ADD_FAILURE() << "refused " << line << ": " << error->message;
    return {};
  }
  return std::get<Request>(std::move(result));
}

// Decodes a line that must be refused, and checks what holds for every refusal: bad_request,
// a non-empty message that is valid UTF-8 and encodes as one line.
inline DecodeError MustFail(std::string_view line, const Limits& limits = kLimits) {
  auto result = DecodeRequest(line, limits);
  if (std::holds_alternative<Request>(result)) {
    ADD_FAILURE() << "accepted " << line;
    return {};
  }
  auto error = std::get<DecodeError>(std::move(result));
  EXPECT_EQ(error.code, ErrorCode::kBadRequest) << error.message;
  EXPECT_FALSE(error.message.empty());
  EXPECT_NO_THROW((void)json(error.message).dump()) << "message is not valid UTF-8";
  EXPECT_LT(error.message.size(), 600u) << error.message;
  const std::string encoded = EncodeError(error.id, error.code, error.message);
  EXPECT_EQ(encoded.find('\n'), encoded.size() - 1);
  return error;
}

template <typename T>
inline T MustDecodeAs(std::string_view line, const Limits& limits = kLimits) {
  const Request request = MustDecode(line, limits);
  if (!std::holds_alternative<T>(request.op)) {
    ADD_FAILURE() << "decoded " << line << " as variant index " << request.op.index();
    return {};
  }
  return std::get<T>(request.op);
}

// A line with one field replaced or added, built with nlohmann so the test reads as data.
inline std::string With(json request, const std::string& key, json value) {
  request[key] = std::move(value);
  return request.dump();
}

}  // namespace lw::protocol::decode_helpers
