#pragma once
// The commit this binary was built from (12 hex digits, or "unknown" outside a git checkout),
// written at every build by cmake/build_commit.cmake.

#include <string_view>

namespace lw {

std::string_view BuildCommit();

}  // namespace lw
