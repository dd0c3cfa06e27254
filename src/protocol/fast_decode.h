#pragma once
// A fast path for the hot ops (acquire and release): decodes a line without building a JSON
// document, allocating nothing but the Request's own strings.

#include <optional>
#include <string_view>

#include "protocol/messages.h"

namespace lw::protocol {

// Returns the Request that DecodeRequest(line, limits) would return, or nullopt. It returns a
// Request only for a flat JSON object it reads in full whose op is acquire or release: keys in
// any order, each once, only that op's fields; an id that is an integer fitting int64 or a
// string; strings of printable ASCII without escapes; integers without fraction, exponent or
// leading zeros; true/false for flags; JSON whitespace between tokens; values within the same
// rules DecodeRequest applies. Anything else, valid or not (an escape, a null, non-ASCII,
// a BOM, a refused value...), gives nullopt, and the caller decodes the line with
// DecodeRequest, which gives every error and every other request.
std::optional<Request> DecodeHotRequest(std::string_view line, const Limits& limits);

}  // namespace lw::protocol
