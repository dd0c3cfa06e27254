#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace lw {

inline constexpr size_t kMaxResourceBytes = 256;

// Checks a client-supplied resource name: 1..256 bytes, valid UTF-8, no control
// characters (C0, DEL, C1). Returns a human reason when the name is refused.
std::optional<std::string> ResourceNameProblem(std::string_view name);

}  // namespace lw
