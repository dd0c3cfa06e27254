#include "locking/turns.h"

#include <algorithm>
#include <charconv>
#include <climits>

#include "core/redlock_math.h"
#include "locking/kinds/kinds.h"

namespace lw {
namespace {

// QueueHead's answer: a whole number of ms (anything else reads as a long wait, which only
// stops local hand-off).
int64_t ParseWaited(const std::string& text) {
  int64_t ms = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), ms);
  return ec == std::errc() && end == text.data() + text.size() && ms >= 0 ? ms : INT32_MAX;
}

}  // namespace

int64_t Turns::WaitingTtlMs() const {
  return std::max<int64_t>(
      1000, 2 * (options_.retry_delay_ms + options_.retry_jitter_ms + options_.node_timeout_ms));
}

int64_t Turns::ReserveMs() const {
  return options_.retry_delay_ms + options_.retry_jitter_ms + 2 * options_.node_timeout_ms;
}

int64_t Turns::HandOffWindowMs() const {
  return options_.handoff_window_ms >= 0 ? options_.handoff_window_ms
                                         : options_.retry_delay_ms + options_.retry_jitter_ms;
}

void Turns::AttemptEnded(TurnState& s, const VoteTally& t) {
  if (t.no() > 0 || t.failed() > 0 || !t.Won()) s.queued = true;
}

void Turns::GrantHeard(TurnState& s, bool asked, const RoundResult& res) {
  s.others = {asked && res.others_untold == 0, res.others_waited_ms, res.started};
}

bool Turns::HandOff(const TurnState& s, const Kind& k, HoldMode mode, Clock::time_point came,
                    Clock::time_point now, HandOffCase& c) const {
  c.turns = Take(k, mode);
  c.next_first = MayGoBeforeOthers(came, s.others, now, HandOffWindowMs());
  // Nobody waited elsewhere when last heard, but that was a window ago: hand over and ask the
  // masters again beside it, rather than send this release through them (for a semaphore, that
  // sets every other holder's release on the same path until a grant). Nothing heard (a grant
  // with no local waiter to ask for) or a waiter heard of: through the masters.
  const bool ask = c.turns && !c.next_first && s.others.asked && s.others.waited_ms < 0;
  c.next_first = c.next_first || ask;
  return ask;
}

RoundRequest Turns::Release(const Kind& k, const HoldPlace& p, const std::string& value,
                            HoldMode mode, std::optional<HoldMode> next_mode,
                            Clock::time_point came) const {
  if (!Take(k, mode)) return k.ReleaseRound(p, value);
  Turn turn;
  turn.reserve_ms = ReserveMs();
  // Only a next waiter that takes turns can claim a reservation for this agent.
  if (next_mode && Take(k, *next_mode)) turn.next_waited_ms = CeilMs(Clock::now() - came);
  return k.ReleaseTurn(p, value, options_.value_prefix, turn);
}

std::optional<RoundRequest> Turns::Ask(TurnState& s, const HoldPlace& p) const {
  if (s.asking) return std::nullopt;
  s.asking = true;
  return kinds::QueueHead(p, options_.value_prefix);
}

void Turns::Heard(TurnState& s, const RoundResult& res) {
  s.asking = false;
  // Heard only when every master answered: one silent may have a waiter.
  OthersHeard heard{true, -1, res.started};
  for (size_t i = 0; i < res.values.size(); ++i) {
    if (res.values[i]) {
      heard.waited_ms = std::max(heard.waited_ms, ParseWaited(*res.values[i]));
    } else if (!res.read_nil[i]) {
      heard.asked = false;
    }
  }
  s.others = heard;
}

std::optional<RoundRequest> Turns::Leave(TurnState& s, const HoldPlace& p) const {
  if (!s.queued) return std::nullopt;
  s.queued = false;
  return kinds::LeaveQueue(p, options_.value_prefix);
}

}  // namespace lw
