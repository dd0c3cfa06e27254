// Agent: the pre-copy of an in-place upgrade (format 3, docs/upgrade.md "Pre-copy"). Once the
// new process is ready, this one copies every hold to it in slices, a few thousand per loop
// turn, while it goes on serving, and tracks every hold that changes from the first slice on;
// only then does it hold requests (HoldForHandOver), and the state it sends carries just what
// changed: the holds granted since in full, the copied ones renewed or extended as updates, the
// copied ones ended as `gone`. So requests wait for the changes, not for every hold to be
// captured, encoded, decoded and entered again.

#include <spdlog/spdlog.h>

#include "agent/agent.h"
#include "agent/fd_passing.h"

namespace lw {
namespace {

// Holds per slice: a slice takes a few milliseconds of this loop (capture and encode) and of the
// new process's (decode and enter), so requests in between wait at most that long.
constexpr size_t kSliceHolds = 2048;
constexpr int64_t kPreCopyTimeoutMs = 60'000;

}  // namespace

void Agent::PreCopy() {
  uv_poll_stop(upgrade_->poll);  // nothing is expected from the new process until the state
  upgrade_->to_copy = service_->SessionsToCopy();
  engine_->TrackChanges(&upgrade_->copied.touched);  // from before the first slice
  upgrade_->precopy_started = std::chrono::steady_clock::now();
  upgrade_->deadline->Start(kPreCopyTimeoutMs, [this] {
    AbortUpgrade("the pre-copy of the holds did not end within " +
                 std::to_string(kPreCopyTimeoutMs) + " ms");
  });
  spdlog::info("upgrade: pid {} (version {}) is ready; copying the holds of {} session(s) while "
               "serving", upgrade_->child_pid, upgrade_->child_version, upgrade_->to_copy.size());
  upgrade_->precopy = std::make_unique<Timer>(loop_);
  upgrade_->precopy->StartRepeat(1, [this] { CopySlice(); });
}

void Agent::CopySlice() {
  handover::PreCopy slice;
  auto& u = *upgrade_;
  slice.format = u.format;
  while (u.next_to_copy < u.to_copy.size() && slice.holds.size() < kSliceHolds) {
    const SessionId sid = u.to_copy[u.next_to_copy++];
    for (auto& hold : engine_->HoldsOf(sid)) {
      u.copied.serials.insert(hold.serial);
      slice.holds.emplace_back(sid, std::move(hold));
    }
  }
  if (!slice.holds.empty()) {
    if (auto why = handover::SendMessage(u.channel, handover::EncodePreCopy(slice))) {
      return AbortUpgrade("cannot send a pre-copy slice: " + *why);
    }
    ++u.slices;
  }
  if (u.next_to_copy < u.to_copy.size()) return;
  u.precopy->Stop();
  spdlog::info("upgrade: {} hold(s) copied in {} slice(s) in {} ms while serving",
               u.copied.serials.size(), u.slices,
               std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now() - u.precopy_started)
                   .count());
  HoldForHandOver();
}

}  // namespace lw
