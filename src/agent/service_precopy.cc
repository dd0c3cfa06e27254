// LockService's part of a pre-copied upgrade (docs/upgrade.md, "Pre-copy"): the old process
// copies the holds while it still serves; the next process enters them as they come, and at the
// hand-over only brings them up to date, takes the new ones, and drops the ones that ended.

#include <spdlog/spdlog.h>

#include <algorithm>

#include "agent/lock_service.h"
#include "core/quote.h"

namespace lw {

std::vector<SessionId> LockService::SessionsToCopy() const {
  std::vector<SessionId> out;
  sessions_.ForEach([&](const ClientSession& s) {
    if (!s.locks.held.empty()) out.push_back(s.id);
  });
  return out;
}

void LockService::Stage(const handover::PreCopy& slice, Staged& staged) {
  ++staged.slices;
  for (const auto& [session, hold] : slice.holds) {
    staged.sessions.insert(session);
    auto entered = engine_.Stage(session, hold);
    if (const auto* held = std::get_if<const Holder*>(&entered)) {
      staged.holds[hold.serial] = {hold.resource, *held};
    } else {
      staged.refused[hold.serial] = {session, hold};
    }
  }
}

void LockService::UpdateStaged(const std::vector<HoldUpdate>& kept, Staged& staged,
                               std::vector<HandedHold>& late) {
  for (const HoldUpdate& u : kept) {
    if (auto it = staged.holds.find(u.serial); it != staged.holds.end()) {
      engine_.UpdateStaged(it->second.name, it->second.hold, u);
    } else if (auto r = staged.refused.find(u.serial); r != staged.refused.end()) {
      HandedHold hold = std::move(r->second.second);
      hold.ttl_ms = u.ttl_ms;
      hold.valid_until = u.valid_until;
      late.push_back(std::move(hold));
      staged.refused.erase(r);
    } else {
      spdlog::error("a pre-copied hold (serial {}) was never received; its client's next "
                    "release or extend of it answers not_held", u.serial);
    }
  }
}

void LockService::DropStale(Staged& staged, const std::vector<uint64_t>& gone,
                            const std::unordered_set<SessionId>& adopted) {
  size_t dropped = 0;
  for (uint64_t serial : gone) {
    auto it = staged.holds.find(serial);
    if (it == staged.holds.end()) continue;  // refused at the pre-copy: nothing to drop
    engine_.DropStaged(it->second.name, it->second.hold);
    staged.holds.erase(it);
    ++dropped;
  }
  // A session no connection came for: closed meanwhile (its holds are in `gone`), or handed
  // but not served here (its client reconnects and resumes). Its holds, if any are left, are
  // forgotten here without a word to the masters, as format 2 leaves such a session's.
  const bool all_came = std::all_of(staged.sessions.begin(), staged.sessions.end(),
                                    [&](SessionId sid) {
                                      return IsLeaseSession(sid) || adopted.count(sid) != 0;
                                    });
  for (auto it = staged.holds.begin(); !all_came && it != staged.holds.end();) {
    const SessionId sid = it->second.hold->session;
    if (IsLeaseSession(sid) || adopted.count(sid) != 0) {
      ++it;
      continue;
    }
    engine_.DropStaged(it->second.name, it->second.hold);
    it = staged.holds.erase(it);
    ++dropped;
  }
  for (SessionId sid : staged.sessions) {
    if (!IsLeaseSession(sid) && adopted.count(sid) == 0) sessions_.Erase(sid);
  }
  if (dropped > 0) {
    spdlog::debug("{} pre-copied hold(s) dropped: ended by the hand-over, or of a connection "
                  "not served here", dropped);
  }
}

}  // namespace lw
