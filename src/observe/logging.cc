#include "observe/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace lw {

void SetUpLogging(const std::string& level) {
  auto logger = spdlog::stderr_color_mt("lockwarden");
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%-5l%$ %v");
  logger->set_level(spdlog::level::from_str(level));
  spdlog::set_default_logger(logger);
}

}  // namespace lw
