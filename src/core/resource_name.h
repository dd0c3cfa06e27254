#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace lw {

inline constexpr size_t kMaxResourceBytes = 256;

// Checks a client-supplied resource name: 1..256 bytes, valid UTF-8, no control
// characters (C0, DEL, C1). Returns a human reason when the name is refused.
std::optional<std::string> ResourceNameProblem(std::string_view name);
// The same rules for any client text of 1..max_bytes bytes; `what` names it in the reason.
std::optional<std::string> TextProblem(std::string_view text, size_t max_bytes,
                                       std::string_view what);

}  // namespace lw
