#pragma once

#include <string>
#include <string_view>

namespace lw {

inline constexpr size_t kTokenBytes = 20;

// A fresh lock token: 20 bytes from the kernel CSPRNG (getrandom), as 40 lowercase hex
// characters. Throws std::runtime_error only if the kernel cannot supply randomness.
std::string NewToken();

// True if s looks like a token this agent could have issued (40 lowercase hex characters).
bool IsWellFormedToken(std::string_view s);

}  // namespace lw
