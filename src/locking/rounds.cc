#include "locking/rounds.h"

namespace lw {
namespace {

enum class Vote { kYes, kNo, kFailed };

Vote Classify(RoundOp op, const Reply& r) {
  using K = Reply::Kind;
  if (op == RoundOp::kSetIfAbsent) {
    if (r.kind == K::kStatus && r.text == "OK") return Vote::kYes;
    if (r.kind == K::kNil) return Vote::kNo;
    return Vote::kFailed;
  }
  if (r.kind == K::kInteger) return r.integer == 1 ? Vote::kYes : Vote::kNo;
  return Vote::kFailed;
}

}  // namespace

EngineObserver& SilentEngineObserver() {
  static EngineObserver silent;
  return silent;
}

Rounds::Rounds(uv_loop_t* loop, std::vector<Node*> nodes, int64_t node_timeout_ms,
               EngineObserver* observer)
    : nodes_(std::move(nodes)),
      observer_(observer ? observer : &SilentEngineObserver()),
      quorum_(QuorumSize(static_cast<int>(nodes_.size()))),
      node_timeout_(node_timeout_ms),
      timer_(loop) {}

void Rounds::Run(RoundOp op, const std::string& key, const std::string& token, int64_t ttl_ms,
                 bool wait_all, RoundDone done) {
  const uint64_t id = next_id_++;
  const auto started = Clock::now();
  rounds_.emplace(id, Round{VoteTally(size(), quorum_), started, wait_all, std::move(done),
                            std::vector<bool>(nodes_.size(), false)});
  deadlines_.emplace_back(started + node_timeout_, id);
  if (!timer_.active()) ArmTimer();
  for (size_t i = 0; i < nodes_.size(); ++i) {
    Node* node = nodes_[i];
    auto handler = [this, id, i, op](const Reply& r) { OnAnswer(id, i, op, r); };
    switch (op) {
      case RoundOp::kSetIfAbsent:
        node->SetIfAbsent(key, token, ttl_ms, std::move(handler));
        break;
      case RoundOp::kDeleteIfHeld:
        node->DeleteIfHeld(key, token, std::move(handler));
        break;
      case RoundOp::kExtendIfHeld:
        node->ExtendIfHeld(key, token, ttl_ms, std::move(handler));
        break;
    }
  }
}

void Rounds::OnAnswer(uint64_t id, size_t node, RoundOp op, const Reply& reply) {
  auto it = rounds_.find(id);
  if (it == rounds_.end()) return;  // the round already ended: a late answer never counts
  Round& round = it->second;
  round.answered[node] = true;
  switch (Classify(op, reply)) {
    case Vote::kYes:
      round.tally.Yes();
      break;
    case Vote::kNo:
      round.tally.No();
      break;
    case Vote::kFailed:
      round.tally.Failed();
      break;
  }
  if (round.wait_all ? round.tally.AllIn() : (round.tally.Decided() || round.tally.AllIn())) {
    Finish(id, /*by_deadline=*/false);
  }
}

void Rounds::Finish(uint64_t id, bool by_deadline) {
  auto it = rounds_.find(id);
  if (it == rounds_.end()) return;
  Round round = std::move(it->second);
  rounds_.erase(it);
  if (by_deadline) {
    for (size_t i = 0; i < round.answered.size(); ++i) {
      if (!round.answered[i]) observer_->MasterMissedDeadline(i);
    }
  }
  round.done(round.tally, round.started);
}

void Rounds::OnDeadline() {
  const auto now = Clock::now();
  while (!deadlines_.empty() && deadlines_.front().first <= now) {
    const uint64_t id = deadlines_.front().second;
    deadlines_.pop_front();
    Finish(id, /*by_deadline=*/true);  // no-op if it already ended
  }
  ArmTimer();
}

void Rounds::ArmTimer() {
  // Skip deadlines of rounds that already ended so the timer does not wake for nothing.
  while (!deadlines_.empty() && rounds_.count(deadlines_.front().second) == 0) {
    deadlines_.pop_front();
  }
  if (deadlines_.empty()) return;
  const auto wait = deadlines_.front().first - Clock::now();
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(wait).count();
  timer_.Start(ms < 0 ? 0 : ms, [this] { OnDeadline(); });
}

}  // namespace lw
