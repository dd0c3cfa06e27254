#include "cycle_load.h"

#include <algorithm>
#include <stdexcept>

namespace lw::bench {
namespace {

uint64_t Ms(double seconds) { return static_cast<uint64_t>(seconds * 1000 + 0.5); }

}  // namespace

LoadShape ShapeFromFlags(const Flags& f) {
  LoadShape shape;
  shape.mode = ParseMode(f.Str("mode", "uncontended"));
  shape.clients = static_cast<int>(f.Int("clients", 1));
  shape.seconds = f.Real("seconds", 5);
  shape.warmup_seconds = f.Real("warmup-seconds", 0.5);
  shape.prefix = f.Str("prefix", "bench/");
  shape.hot_keys = static_cast<int>(f.Int("hot-keys", 4));
  shape.hot_share = f.Real("hot-share", 0.10);
  return shape;
}

Mode ParseMode(const std::string& text) {
  if (text == "uncontended") return Mode::kUncontended;
  if (text == "contended") return Mode::kContended;
  if (text == "mixed") return Mode::kMixed;
  throw std::invalid_argument("--mode must be uncontended, contended or mixed, not " + text);
}

const char* ModeName(Mode m) {
  switch (m) {
    case Mode::kUncontended:
      return "uncontended";
    case Mode::kContended:
      return "contended";
    case Mode::kMixed:
      return "mixed";
  }
  return "?";
}

CycleLoad::CycleLoad(const LoadShape& shape) : shape_(shape) {
  for (int i = 0; i < shape.clients; ++i) own_.push_back(shape.prefix + "u" + std::to_string(i));
  if (shape.mode == Mode::kContended) hot_.push_back(shape.prefix + "one");
  if (shape.mode == Mode::kMixed) {
    for (int k = 0; k < shape.hot_keys; ++k)
      hot_.push_back(shape.prefix + "hot" + std::to_string(k));
  }
  release_sent_.resize(hot_.size());
  release_pending_.resize(hot_.size(), false);
}

void CycleLoad::StartWindow(uv_loop_t* loop, std::function<void()> opened,
                            std::function<void()> closed) {
  opened_ = std::move(opened);
  closed_ = std::move(closed);
  uv_timer_init(loop, &timer_);
  timer_.data = this;
  uv_timer_start(&timer_, OnTimer, Ms(shape_.warmup_seconds), 0);
}

void CycleLoad::OnTimer(uv_timer_t* t) {
  auto* self = static_cast<CycleLoad*>(t->data);
  if (!self->in_window_) {
    self->in_window_ = true;
    self->opened_at_ = Clock::now();
    self->opened_();
    uv_timer_start(t, OnTimer, Ms(self->shape_.seconds), 0);
    return;
  }
  self->in_window_ = false;
  self->over_ = true;
  self->window_seconds_ = std::chrono::duration<double>(Clock::now() - self->opened_at_).count();
  uv_close(reinterpret_cast<uv_handle_t*>(t), nullptr);
  self->closed_();
}

Pick CycleLoad::Choose(int client) {
  switch (shape_.mode) {
    case Mode::kUncontended:
      return {&own_[static_cast<size_t>(client)], -1};
    case Mode::kContended:
      return {&hot_[0], 0};
    case Mode::kMixed:
      break;
  }
  if (std::uniform_real_distribution<double>(0, 1)(rng_) < shape_.hot_share && !hot_.empty()) {
    const int k = static_cast<int>(rng_() % hot_.size());
    return {&hot_[static_cast<size_t>(k)], k};
  }
  return {&own_[static_cast<size_t>(client)], -1};
}

void CycleLoad::Granted(const Pick& p, Clock::time_point sent, const char* role) {
  const auto now = Clock::now();
  if (p.hot >= 0) {
    const auto k = static_cast<size_t>(p.hot);
    if (release_pending_[k] && in_window_) handoff_.Add(Micros(now - release_sent_[k]));
    release_pending_[k] = false;
  }
  if (!in_window_) return;
  const double us = Micros(now - sent);
  acquire_.Add(us);
  if (p.hot < 0) return;
  wait_.Add(us);
  if (role != nullptr) wait_by_role_[role].Add(us);
}

void CycleLoad::ReleaseSent(const Pick& p) {
  if (p.hot < 0) return;
  release_sent_[static_cast<size_t>(p.hot)] = Clock::now();
  release_pending_[static_cast<size_t>(p.hot)] = true;
}

void CycleLoad::AcquireFailed(const std::string& code) {
  ++failures_;
  ++failed_by_code_["acquire_" + (code.empty() ? std::string("unknown") : code)];
}

void CycleLoad::ReleaseFailed(const std::string& code) {
  ++failures_;
  ++failed_by_code_["release_" + (code.empty() ? std::string("unknown") : code)];
}

void CycleLoad::Report(Result& r) {
  r.Text("mode", ModeName(shape_.mode));
  r.Number("clients", shape_.clients);
  r.Number("seconds", window_seconds_, 3);
  r.Number("cycles", static_cast<double>(cycles_));
  r.Number("cycles_per_s",
           window_seconds_ > 0 ? static_cast<double>(cycles_) / window_seconds_ : 0);
  r.Number("failed", static_cast<double>(failures_));
  r.Percentiles("acquire_us", acquire_);
  if (!hot_.empty()) {
    r.Number("wait_samples", static_cast<double>(wait_.size()));
    r.Percentiles("wait_us", wait_);
    r.Percentiles("handoff_us", handoff_);
  }
  for (auto& [role, samples] : wait_by_role_) {
    r.Number("wait_" + role + "_samples", static_cast<double>(samples.size()));
    r.Percentiles("wait_" + role + "_us", samples);
  }
  for (const auto& [code, n] : failed_by_code_) r.Number("failed_" + code, static_cast<double>(n));
}

}  // namespace lw::bench
