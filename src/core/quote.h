#pragma once
// Client-chosen text (resource names, keys, op and field names, request paths, user agents) as
// it appears in a message or a log line, written one way everywhere.

#include <cstddef>
#include <string>
#include <string_view>

namespace lw {

// `text` as a JSON string literal: quotes, backslashes and control characters escaped (so the
// text can neither end a line nor forge a field), always valid UTF-8 (a byte that is not part
// of a well-formed sequence becomes U+FFFD). With max_bytes > 0, text longer than that is cut
// without splitting a character and followed by "... (N bytes)".
std::string QuoteClientText(std::string_view text, size_t max_bytes = 0);

// The longest prefix of `text` of at most max bytes that does not split a UTF-8 sequence.
std::string_view ShortenUtf8(std::string_view text, size_t max);

}  // namespace lw
