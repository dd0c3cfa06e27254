#pragma once
// Waiting on state in other processes that offers no event to wait on.

#include <chrono>
#include <functional>

namespace lw::test {

// Re-checks `condition` every `pause` until it holds (true) or `deadline` passes (false).
bool Eventually(const std::function<bool()>& condition, std::chrono::milliseconds deadline,
                std::chrono::milliseconds pause = std::chrono::milliseconds(2));

}  // namespace lw::test
