#include "upgrade_load.h"

#include <algorithm>
#include <cstdio>

namespace lw::bench {

const char* LoadOpName(LoadOp op) {
  switch (op) {
    case LoadOp::kAcquire:
      return "acquire";
    case LoadOp::kRelease:
      return "release";
    case LoadOp::kPing:
      return "ping";
  }
  return "?";
}

void LoadRecord::Report(Result& r, double begin, double end, double grace) const {
  Samples before, across, after;
  const Request* longest = nullptr;
  std::vector<double> answered;
  answered.reserve(requests_.size());
  for (const auto& q : requests_) {
    const double us = (q.answered - q.sent) * 1e6;
    if (q.answered < begin) {
      before.Add(us);
    } else if (q.sent > end + grace) {
      after.Add(us);
    } else {
      across.Add(us);
    }
    if (longest == nullptr || q.answered - q.sent > longest->answered - longest->sent) {
      longest = &q;
    }
    answered.push_back(q.answered);
  }
  for (auto [name, samples] : {std::pair<const char*, Samples*>{"before", &before},
                               {"across", &across},
                               {"after", &after}}) {
    r.Number(std::string(name) + "_requests", static_cast<double>(samples->size()));
    r.Percentiles(std::string(name) + "_us", *samples);
  }
  r.Number("longest_ms", longest ? (longest->answered - longest->sent) * 1e3 : 0, 1);
  r.Text("longest_op", longest ? LoadOpName(longest->op) : "none");
  r.Number("longest_sent_ms", longest ? (longest->sent - begin) * 1e3 : 0, 1);
  std::sort(answered.begin(), answered.end());
  double gap = 0, gap_at = 0;
  for (size_t i = 1; i < answered.size(); ++i) {
    if (answered[i] - answered[i - 1] > gap) {
      gap = answered[i] - answered[i - 1];
      gap_at = answered[i - 1];
    }
  }
  r.Number("reply_gap_max_ms", gap * 1e3, 1);
  r.Number("reply_gap_at_ms", (gap_at - begin) * 1e3, 1);
  r.Number("load_failed", static_cast<double>(failures_));
  for (const auto& [code, n] : failed_by_) r.Number("load_failed_" + code, static_cast<double>(n));
}

LoadCycler::LoadCycler(uv_loop_t* loop, HoldingSession& session, const LoadShapeU& shape,
                       LoadRecord& record)
    : session_(session),
      shape_(shape),
      record_(record),
      resource_(shape.prefix + std::to_string(session.index())) {
  uv_timer_init(loop, &timer_);
  timer_.data = this;
}

void LoadCycler::Start(uint64_t delay_ms) {
  op_ = LoadOp::kAcquire;
  uv_timer_start(&timer_, Fire, delay_ms, 0);
}

void LoadCycler::Fire(uv_timer_t* t) {
  auto* self = static_cast<LoadCycler*>(t->data);
  self->Send(self->op_);
}

void LoadCycler::Stop() {
  stopping_ = true;
  if (!in_flight_ && token_.empty()) {
    uv_timer_stop(&timer_);
    done_ = true;
  }
  // Else: the reply in flight, or the release the timer is about to send, ends the cycle.
}

void LoadCycler::Close() {
  uv_timer_stop(&timer_);
  uv_close(reinterpret_cast<uv_handle_t*>(&timer_), nullptr);
}

void LoadCycler::After(LoadOp next) {
  op_ = next;
  if (stopping_ && token_.empty()) {
    done_ = true;
    return;
  }
  if (shape_.think_ms <= 0) return Send(next);
  uv_timer_start(&timer_, Fire, static_cast<uint64_t>(shape_.think_ms), 0);
}

void LoadCycler::Send(LoadOp op) {
  if (session_.broken()) return;
  op_ = op;
  ++id_;
  int n = 0;
  const auto id = static_cast<long long>(id_);
  switch (op) {
    case LoadOp::kAcquire:
      n = std::snprintf(out_, sizeof out_,
                        "{\"id\":%lld,\"op\":\"acquire\",\"resource\":\"%s\",\"ttl_ms\":%lld,"
                        "\"wait_ms\":%lld}\n",
                        id, resource_.c_str(), static_cast<long long>(shape_.ttl_ms),
                        static_cast<long long>(shape_.wait_ms));
      break;
    case LoadOp::kRelease:
      n = std::snprintf(out_, sizeof out_,
                        "{\"id\":%lld,\"op\":\"release\",\"resource\":\"%s\",\"token\":\"%s\"}\n",
                        id, resource_.c_str(), token_.c_str());
      break;
    case LoadOp::kPing:
      n = std::snprintf(out_, sizeof out_, "{\"id\":%lld,\"op\":\"ping\"}\n", id);
      break;
  }
  in_flight_ = true;
  sent_ = Clock::now();
  session_.Send(std::string_view(out_, static_cast<size_t>(n)));
}

bool LoadCycler::OnLine(const AgentLine& a, std::string_view) {
  if (a.id < kFirstId || !in_flight_ || a.id != id_) return false;
  in_flight_ = false;
  record_.Add(sent_, Clock::now(), op_);
  switch (op_) {
    case LoadOp::kAcquire:
      if (a.ok && a.token.size() == 40) {
        token_ = std::string(a.token);
        After(LoadOp::kRelease);
        return true;
      }
      record_.Failed(op_, a.error);
      After(LoadOp::kPing);
      return true;
    case LoadOp::kRelease:
      token_.clear();
      if (!a.ok) record_.Failed(op_, a.error);
      After(LoadOp::kPing);
      return true;
    case LoadOp::kPing:
      if (!a.ok) record_.Failed(op_, a.error);
      After(LoadOp::kAcquire);
      return true;
  }
  return true;
}

}  // namespace lw::bench
