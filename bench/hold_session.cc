#include "hold_session.h"

#include <hiredis/adapters/libuv.h>
#include <hiredis/hiredis.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace lw::bench {

void Pacer::Pump() {
  size_t idle = 0;  // sessions in a row with nothing to send
  while (in_flight_ < inflight_ && idle < sessions_.size()) {
    HoldingSession* s = sessions_[next_];
    next_ = (next_ + 1) % sessions_.size();
    if (s->SendOne()) {
      ++in_flight_;
      idle = 0;
    } else {
      ++idle;
    }
  }
}

HoldingSession::HoldingSession(uv_loop_t* loop, const std::string& socket, int index,
                               const HoldShape& shape, Tally& tally, Pacer& pacer,
                               std::vector<int>& granted_order, int* connected)
    : index_(index), shape_(shape), tally_(tally), pacer_(pacer), granted_order_(granted_order) {
  tokens_.resize(static_cast<size_t>(shape.locks));
  sent_.resize(static_cast<size_t>(shape.locks));
  link_ = std::make_unique<AgentLink>(
      loop, socket,
      [this, connected](int status) {
        ++*connected;
        if (status != 0) {
          ++tally_.broken;
          ++tally_.broken_by[std::string("connect: ") + uv_err_name(status)];
          broken_ = true;
        }
      },
      [this](std::string_view line) { OnLine(line); },
      [this] {
        ++tally_.broken;
        ++tally_.broken_by["closed by the agent"];
        broken_ = true;
      });
}

bool HoldingSession::SendOne() {
  if (broken_) return false;
  if (!releasing_) {
    if (next_ >= shape_.locks) return false;
    SendAcquire();
    return true;
  }
  return SendNextRelease();
}

std::string HoldingSession::Resource(int l) const {
  return shape_.prefix + std::to_string(index_) + "/" + std::to_string(l);
}

void HoldingSession::SendAcquire() {
  const int l = next_++;
  const int n = std::snprintf(out_, sizeof out_,
                              "{\"id\":%d,\"op\":\"acquire\",\"resource\":\"%s\",\"ttl_ms\":%lld,"
                              "\"wait_ms\":%lld,\"renew\":true}\n",
                              l + 1, Resource(l).c_str(), static_cast<long long>(shape_.ttl_ms),
                              static_cast<long long>(shape_.wait_ms));
  sent_[static_cast<size_t>(l)] = Clock::now();
  link_->Send(std::string_view(out_, static_cast<size_t>(n)));
}

bool HoldingSession::SendNextRelease() {
  while (next_ < shape_.locks && tokens_[static_cast<size_t>(next_)].empty()) ++next_;
  if (next_ >= shape_.locks) return false;
  const int l = next_++;
  const int n = std::snprintf(
      out_, sizeof out_, "{\"id\":%d,\"op\":\"release\",\"resource\":\"%s\",\"token\":\"%s\"}\n",
      -(l + 1), Resource(l).c_str(), tokens_[static_cast<size_t>(l)].c_str());
  link_->Send(std::string_view(out_, static_cast<size_t>(n)));
  return true;
}

void HoldingSession::OnLine(std::string_view line) {
  const AgentLine a = ParseAgentLine(line);
  if (a.is_event) {
    if (++tally_.lost_events <= 5) {  // the first few, to say what was lost
      std::fprintf(stderr, "session %d: event %.*s\n", index_, static_cast<int>(line.size()),
                   line.data());
    }
    return;
  }
  if (a.id > 0 && a.id <= shape_.locks && !releasing_) {
    const auto l = static_cast<size_t>(a.id - 1);
    ++tally_.answered;
    if (a.ok && a.token.size() == 40) {
      ++tally_.acquired;
      ++granted_;
      tally_.acquire_us.Add(Micros(Clock::now() - sent_[l]));
      tokens_[l] = std::string(a.token);
      granted_order_.push_back(index_ * shape_.locks + static_cast<int>(l));
    } else {
      ++tally_.acquire_failed;
      ++tally_.acquire_errors[a.error.empty() ? std::string("unknown") : std::string(a.error)];
    }
    pacer_.Answered();
    return;
  }
  if (a.id < 0 && -a.id <= shape_.locks && releasing_) {
    ++tally_.release_answered;
    --granted_;
    if (a.ok) {
      ++tally_.released_ok;
    } else if (a.error == "not_held") {
      ++tally_.release_not_held;
    } else {
      ++tally_.release_other;
    }
    pacer_.Answered();
    return;
  }
  if (other_ && other_(a, line)) return;
  if (++tally_.protocol_errors > 5) return;  // the first few are printed
  std::fprintf(stderr, "session %d: unexpected line %.*s\n", index_,
               static_cast<int>(std::min<size_t>(line.size(), 300)), line.data());
}

RenewalSampler::RenewalSampler(uv_loop_t* loop, const std::string& host_port,
                               const HoldShape& shape, const std::vector<int>& granted_order)
    : shape_(shape), granted_(granted_order) {
  const auto colon = host_port.rfind(':');
  if (colon == std::string::npos) throw std::invalid_argument("--masters wants HOST:PORT,...");
  ctx_ = redisAsyncConnect(host_port.substr(0, colon).c_str(),
                           std::atoi(host_port.c_str() + colon + 1));
  if (ctx_ == nullptr || ctx_->err) throw std::runtime_error("cannot connect to " + host_port);
  ctx_->data = this;
  redisLibuvAttach(ctx_, loop);
  late_key_.resize(static_cast<size_t>(shape.sessions) * static_cast<size_t>(shape.locks));
  uv_timer_init(loop, &timer_);
  timer_.data = this;
  uv_timer_start(&timer_, Tick, 0, kTickMs);
}

void RenewalSampler::Stop() {
  stopped_ = true;
  uv_close(reinterpret_cast<uv_handle_t*>(&timer_), nullptr);
  redisAsyncDisconnect(ctx_);  // after the replies pending
}

void RenewalSampler::Report(Result& r) const {
  r.Number("pttl_samples", static_cast<double>(samples_));
  r.Number("late_samples", static_cast<double>(late_samples_));
  r.Number("late_keys", static_cast<double>(late_keys_));
  r.Number("late_max_ms", static_cast<double>(std::max<int64_t>(0, max_late_ms_)));
  r.Number("below_third_samples", static_cast<double>(below_third_));
  r.Number("missing_samples", static_cast<double>(missing_));
  r.Number("min_pttl_ms", static_cast<double>(min_pttl_ < 0 ? 0 : min_pttl_));
}

void RenewalSampler::Tick(uv_timer_t* t) {
  auto* self = static_cast<RenewalSampler*>(t->data);
  if (self->stopped_ || self->granted_.empty()) return;
  // Whole budget of this tick, capped so a slow master does not pile up commands.
  // (never more than one pass over the granted keys per tick).
  const int64_t budget =
      std::min<int64_t>(static_cast<int64_t>(self->shape_.sample_rate * kTickMs / 1000.0),
                        static_cast<int64_t>(self->granted_.size()));
  for (int64_t i = 0; i < budget && self->in_flight_ < 4 * budget; ++i) {
    if (self->cursor_ >= self->granted_.size()) self->cursor_ = 0;
    const int idx = self->granted_[self->cursor_++];
    const int s = idx / self->shape_.locks, l = idx % self->shape_.locks;
    const std::string key = self->shape_.key_prefix + self->shape_.prefix + std::to_string(s) +
                            "/" + std::to_string(l);
    ++self->in_flight_;
    redisAsyncCommand(self->ctx_, Reply, reinterpret_cast<void*>(static_cast<intptr_t>(idx)),
                      "PTTL %b", key.data(), key.size());
  }
}

void RenewalSampler::Reply(redisAsyncContext* c, void* reply, void* privdata) {
  auto* self = static_cast<RenewalSampler*>(c->data);
  auto* r = static_cast<redisReply*>(reply);
  --self->in_flight_;
  if (self->stopped_ || r == nullptr || r->type != REDIS_REPLY_INTEGER) return;
  const auto idx = static_cast<size_t>(reinterpret_cast<intptr_t>(privdata));
  const int64_t pttl = r->integer;
  ++self->samples_;
  if (pttl < 0) {
    ++self->missing_;
    return;
  }
  if (self->min_pttl_ < 0 || pttl < self->min_pttl_) self->min_pttl_ = pttl;
  const int64_t late = self->shape_.ttl_ms * 2 / 3 - pttl;
  self->max_late_ms_ = std::max(self->max_late_ms_, late);
  if (pttl < self->shape_.ttl_ms / 3) ++self->below_third_;
  if (late > 100) {
    ++self->late_samples_;
    if (!self->late_key_[idx]) {
      self->late_key_[idx] = true;
      ++self->late_keys_;
    }
  }
}

}  // namespace lw::bench
