#include "locking/rounds.h"

#include <algorithm>
#include <stdexcept>

#include "core/defaults.h"
#include "core/lock_kind.h"

namespace lw {
namespace {

enum class Vote { kYes, kNo, kFailed };

// kClaimExclusive's {"granted", fence, waited} (redis/kind_scripts.h).
bool GrantedArray(const Reply& r) {
  return r.kind == Reply::Kind::kArray && r.elements.size() == 3 &&
         r.elements[0].text == "granted" && r.elements[1].kind == Reply::Kind::kInteger &&
         r.elements[1].integer >= 0 && r.elements[2].kind == Reply::Kind::kInteger;
}

Vote Classify(RoundOp op, const Reply& r) {
  using K = Reply::Kind;
  switch (op) {
    case RoundOp::kKindAcquire:
      if ((r.kind == K::kInteger && r.integer >= 0) || GrantedArray(r)) return Vote::kYes;
      return r.kind == K::kNil || r.kind == K::kArray ? Vote::kNo : Vote::kFailed;
    case RoundOp::kKindRead:
      return r.kind == K::kString || r.kind == K::kNil ? Vote::kYes : Vote::kFailed;
    case RoundOp::kKindFence:
    case RoundOp::kKindExtend:
    case RoundOp::kKindRelease:
    case RoundOp::kDeleteIfHeld:
    case RoundOp::kExtendIfHeld:
    case RoundOp::kRaiseFenceIfHeld:
      break;
  }
  if (r.kind == K::kInteger) return r.integer == 1 ? Vote::kYes : Vote::kNo;
  return Vote::kFailed;
}

// Releases reach every master and every answer counts: quarantine only keeps a master from
// helping to grant or extend.
bool QuarantineApplies(RoundOp op) {
  return op != RoundOp::kDeleteIfHeld && op != RoundOp::kKindRelease && op != RoundOp::kKindRead;
}

// Counts one master's refusal array (redis/kind_scripts.h) into `out`.
void CountRefusal(const Reply& r, KindRefusals& out) {
  if (r.kind != Reply::Kind::kArray || r.elements.empty()) return;
  const std::string& why = r.elements[0].text;
  if (why == "kind") {
    if (r.elements.size() > 1 && !out.foreign) out.foreign = r.elements[1].text;
  } else if (why == "taken") {
    ++out.taken;
    for (size_t i = 1; i < r.elements.size(); ++i) {
      const int64_t permit = r.elements[i].integer;
      if (permit < 0 || permit >= kMaxPermits) continue;
      if (out.free_permits.size() <= static_cast<size_t>(permit)) {
        out.free_permits.resize(static_cast<size_t>(permit) + 1);
      }
      ++out.free_permits[static_cast<size_t>(permit)];
    }
  } else if (why == "writer") {
    ++out.writer;
  } else if (why == "readers") {
    ++out.readers;
  } else if (why == "writer-waiting") {
    ++out.writer_waiting;
  }
}

}  // namespace

RoundRequest DeleteRound(const std::string& key, const std::string& token) {
  RoundRequest req;
  req.op = RoundOp::kDeleteIfHeld;
  req.key = key;
  req.token = token;
  req.wait_all = true;
  return req;
}

Rounds::Rounds(uv_loop_t* loop, std::vector<Node*> nodes, int64_t node_timeout_ms,
               EngineStats* stats, std::string value_prefix)
    : nodes_(std::move(nodes)),
      stats_(stats),
      value_prefix_(std::move(value_prefix)),
      quorum_(QuorumSize(static_cast<int>(nodes_.size()))),
      node_timeout_(node_timeout_ms),
      timer_(loop),
      after_poll_(loop) {
  if (nodes_.size() > kMaxMasters) throw std::invalid_argument("more masters than kMaxMasters");
}

void Rounds::Run(RoundRequest req, RoundDone done) {
  const uint64_t id = next_id_++;
  const auto started = Clock::now();
  std::vector<bool> counts(nodes_.size(), true);
  int n_counting = size();
  if (QuarantineApplies(req.op)) {
    for (size_t i = 0; i < nodes_.size(); ++i) {
      counts[i] = nodes_[i]->votes_count();
      n_counting -= counts[i] ? 0 : 1;
    }
  }
  RoundResult initial{VoteTally(size(), quorum_, req.needed, n_counting), started, -1, 0, {}, {},
                      {}, -1};
  if (req.op == RoundOp::kKindRead) {
    initial.values.resize(nodes_.size());
    initial.read_nil.resize(nodes_.size(), false);
  }
  const std::string value = value_prefix_ + req.token;
  const bool native = req.native && req.op == RoundOp::kKindAcquire;
  std::unique_ptr<Fallback> fallback;
  if (native) {
    fallback = std::make_unique<Fallback>(
        Fallback{req.script, std::move(req.keys), value, std::move(req.args),
                 std::vector<bool>(nodes_.size(), false)});
  }
  rounds_.emplace(id, Round{std::move(initial),
                            req.op, req.wait_all, std::move(done),
                            std::vector<bool>(nodes_.size(), false), std::move(counts),
                            std::move(fallback)});
  const auto deadline =
      started + (req.timeout_ms > 0 ? std::chrono::milliseconds(req.timeout_ms) : node_timeout_);
  if (deadlines_.size() >= 4096 && deadlines_.size() > 2 * rounds_.size()) {
    std::erase_if(deadlines_, [&](const Deadline& d) { return rounds_.count(d.second) == 0; });
    std::make_heap(deadlines_.begin(), deadlines_.end(), std::greater<>());
  }
  deadlines_.emplace_back(deadline, id);
  std::push_heap(deadlines_.begin(), deadlines_.end(), std::greater<>());
  if (!timer_.active() || deadline < armed_for_) ArmTimer();
  for (size_t i = 0; i < nodes_.size(); ++i) {
    Node* node = nodes_[i];
    // Round id and node index in one word: the handler then fits std::function's inline
    // storage, so sending a round allocates no handler. (2^56 rounds; at most 256 masters.)
    auto handler = [this, at = id << 8 | i](const Reply& r) { OnAnswer(at >> 8, at & 0xff, r); };
    if (native) {
      node->SetIfAbsent(req.key, value, req.ttl_ms, std::move(handler));
      continue;
    }
    switch (req.op) {
      case RoundOp::kDeleteIfHeld:
        node->DeleteIfHeld(req.key, value, std::move(handler));
        break;
      case RoundOp::kExtendIfHeld:
        node->ExtendIfHeld(req.key, value, req.ttl_ms, std::move(handler));
        break;
      case RoundOp::kRaiseFenceIfHeld:
        node->RaiseFenceIfHeld(req.key, req.fence_key, value, req.fence, std::move(handler));
        break;
      case RoundOp::kKindAcquire:
      case RoundOp::kKindExtend:
      case RoundOp::kKindRelease:
      case RoundOp::kKindFence:
      case RoundOp::kKindRead:
        node->RunKindScript(req.script, req.keys, value, req.args, std::move(handler));
        break;
    }
  }
}

void Rounds::OnAnswer(uint64_t id, size_t node, const Reply& answer) {
  auto it = rounds_.find(id);
  if (it == rounds_.end()) return;  // the round already ended: a late answer never counts
  Round& round = it->second;
  RoundResult& res = round.result;
  Reply set;  // a native SET's OK, as the script's grant without a fence
  if (round.fallback && answer.kind == Reply::Kind::kStatus && answer.text == "OK") {
    set.kind = Reply::Kind::kInteger;
    set.integer = 0;
  } else if (round.fallback && answer.kind == Reply::Kind::kNil && !round.fallback->sent[node]) {
    // Refused by the native SET: the script decides (readers, a reservation, queueing).
    Fallback& f = *round.fallback;
    f.sent[node] = true;
    nodes_[node]->RunKindScript(
        f.script, f.keys, f.value, f.args,
        [this, at = id << 8 | node](const Reply& r) { OnAnswer(at >> 8, at & 0xff, r); });
    return;
  }
  const Reply& reply = set.kind == Reply::Kind::kInteger ? set : answer;
  round.answered[node] = true;
  const bool counts = round.counts[node];
  switch (Classify(round.op, reply)) {
    case Vote::kYes:
      res.tally.Yes(counts);
      if (round.op == RoundOp::kKindAcquire && GrantedArray(reply)) {
        res.max_fence = std::max(res.max_fence, reply.elements[1].integer);
        res.others_waited_ms = std::max(res.others_waited_ms, reply.elements[2].integer);
      } else if (round.op == RoundOp::kKindAcquire) {
        res.max_fence = std::max(res.max_fence, reply.integer);
        ++res.others_untold;
      }
      if (round.op == RoundOp::kKindRead) {
        if (reply.kind == Reply::Kind::kString) {
          res.values[node] = reply.text;
        } else {
          res.read_nil[node] = true;
        }
      }
      break;
    case Vote::kNo:
      res.tally.No(counts);
      if (round.op == RoundOp::kKindAcquire) CountRefusal(reply, res.refusals);
      if ((round.op == RoundOp::kRaiseFenceIfHeld || round.op == RoundOp::kKindFence) &&
          reply.integer == -1) {
        ++res.fence_refused;
      }
      break;
    case Vote::kFailed:
      res.tally.Failed(counts);
      break;
  }
  const VoteTally& t = res.tally;
  if (round.wait_all ? t.AllIn() : (t.Decided() || t.AllIn())) Finish(id, /*by_deadline=*/false);
}

void Rounds::Finish(uint64_t id, bool by_deadline) {
  auto it = rounds_.find(id);
  if (it == rounds_.end()) return;
  Round round = std::move(it->second);
  rounds_.erase(it);
  if (rounds_.empty()) {
    // Nothing left to time out: an armed timer would only keep the loop alive (a renewal
    // round's deadline can be seconds away), e.g. delaying the agent's exit.
    deadlines_.clear();
    timer_.Stop();
    armed_for_ = Clock::time_point::max();
  }
  if (by_deadline && stats_ != nullptr) {
    for (size_t i = 0; i < round.answered.size(); ++i) {
      if (!round.answered[i]) stats_->MasterMissedDeadline(i);
    }
  }
  round.done(round.result);
}

// A timer fires before its loop turn polls for I/O. After a turn that ran long (the loop, not a
// master, was late), the answers of the rounds now due may already wait in the sockets: the
// rounds end only after the next poll has read them (AfterPoll), and a master counts as having
// missed a deadline only if its answer had not reached the agent when the loop looked. Safety
// does not rest on the deadline: a grant's validity is reckoned from the round's start.
void Rounds::OnDeadline() {
  expire_upto_ = Clock::now();
  armed_for_ = Clock::time_point::max();
  after_poll_.Arm([this] { ExpireDue(); });
}

void Rounds::ExpireDue() {
  while (!deadlines_.empty() && deadlines_.front().first <= expire_upto_) {
    std::pop_heap(deadlines_.begin(), deadlines_.end(), std::greater<>());
    const uint64_t id = deadlines_.back().second;
    deadlines_.pop_back();
    Finish(id, /*by_deadline=*/true);  // no-op if it already ended
  }
  ArmTimer();
}

void Rounds::ArmTimer() {
  // Skip deadlines of rounds that already ended so the timer does not wake for nothing.
  while (!deadlines_.empty() && rounds_.count(deadlines_.front().second) == 0) {
    std::pop_heap(deadlines_.begin(), deadlines_.end(), std::greater<>());
    deadlines_.pop_back();
  }
  if (deadlines_.empty()) return;
  armed_for_ = deadlines_.front().first;
  const auto wait = armed_for_ - Clock::now();
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(wait).count();
  timer_.Start(ms < 0 ? 0 : ms, [this] { OnDeadline(); });
}

}  // namespace lw
