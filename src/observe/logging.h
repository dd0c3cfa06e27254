#pragma once
// Logging setup: one stderr logger, ISO timestamps, the configured level.

#include <string>

namespace lw {

void SetUpLogging(const std::string& level);

}  // namespace lw
