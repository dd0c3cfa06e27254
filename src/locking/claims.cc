#include "locking/claims.h"

#include "redis/scripts.h"

namespace lw {
namespace {

using scripts::KindScript;

RoundRequest KindRound(RoundOp op, KindScript script, const std::string& token) {
  RoundRequest req;
  req.op = op;
  req.script = script;
  req.token = token;
  return req;
}

}  // namespace

HoldMode ModeOf(const LockShape& shape, bool shared) {
  if (shape.kind == LockKind::kSemaphore) return HoldMode::kPermit;
  return shared ? HoldMode::kShared : HoldMode::kExclusive;
}

std::string BaseKey(const HoldPlace& p) { return p.key_prefix + p.name; }

std::string HoldKey(const HoldPlace& p) {
  switch (p.mode) {
    case HoldMode::kExclusive:
      return BaseKey(p);
    case HoldMode::kShared:
      return ReadersKey(p.key_prefix, p.name);
    case HoldMode::kPermit:
      return PermitKey(p.key_prefix, p.name, p.permit);
  }
  return BaseKey(p);
}

FencedKeys FencedKeysOf(const HoldPlace& p) {
  return {HoldKey(p), p.mode == HoldMode::kPermit
                          ? PermitFenceKey(p.fence_prefix, p.name, p.permit)
                          : p.fence_prefix + p.name};
}

RoundRequest AcquireRound(const HoldPlace& p, const std::string& token, int64_t ttl_ms,
                          int fence_needed, int64_t waiting_ttl_ms, const std::string& mark,
                          bool may_hold_mark) {
  const std::string ttl = std::to_string(ttl_ms);
  RoundRequest req;
  switch (p.mode) {
    case HoldMode::kExclusive:
      req = KindRound(RoundOp::kKindAcquire, KindScript::kClaimExclusive, token);
      req.keys = {BaseKey(p), ReadersKey(p.key_prefix, p.name),
                  WriterWaitingKey(p.key_prefix, p.name)};
      req.args = {ttl, std::to_string(waiting_ttl_ms), mark, may_hold_mark ? "1" : "0"};
      break;
    case HoldMode::kShared:
      req = KindRound(RoundOp::kKindAcquire, KindScript::kClaimShared, token);
      req.keys = {BaseKey(p), ReadersKey(p.key_prefix, p.name),
                  WriterWaitingKey(p.key_prefix, p.name)};
      req.args = {ttl};
      break;
    case HoldMode::kPermit: {
      req = KindRound(RoundOp::kKindAcquire, KindScript::kClaimPermit, token);
      req.keys = {BaseKey(p), HoldKey(p), ReadersKey(p.key_prefix, p.name)};
      std::string permits_prefix = PermitKey(p.key_prefix, p.name, 0);
      permits_prefix.pop_back();  // P R US "permit:"
      req.args = {ttl, p.shape.Marker(), std::to_string(p.shape.permits),
                  std::to_string(p.permit), std::move(permits_prefix)};
      break;
    }
  }
  if (fence_needed > 0) {
    req.keys.push_back(FencedKeysOf(p).fence_key);
    req.needed = fence_needed;
  }
  req.key = HoldKey(p);
  req.ttl_ms = ttl_ms;
  return req;
}

RoundRequest ExtendRound(const HoldPlace& p, const std::string& token, int64_t ttl_ms) {
  RoundRequest req;
  if (p.shape.kind == LockKind::kElection) {
    // The record lives at least as long as the hold (kExtendPermit: KEYS marker-like, key).
    req = KindRound(RoundOp::kKindExtend, KindScript::kExtendPermit, token);
    req.keys = {LeaderKey(p.key_prefix, p.name), BaseKey(p)};
    req.args = {std::to_string(ttl_ms)};
    req.key = BaseKey(p);
    req.ttl_ms = ttl_ms;
    return req;
  }
  switch (p.mode) {
    case HoldMode::kExclusive:
      req.op = RoundOp::kExtendIfHeld;
      req.token = token;
      break;
    case HoldMode::kShared:
      req = KindRound(RoundOp::kKindExtend, KindScript::kExtendShared, token);
      req.keys = {HoldKey(p)};
      req.args = {std::to_string(ttl_ms)};
      break;
    case HoldMode::kPermit:
      req = KindRound(RoundOp::kKindExtend, KindScript::kExtendPermit, token);
      req.keys = {BaseKey(p), HoldKey(p)};
      req.args = {std::to_string(ttl_ms)};
      break;
  }
  req.key = HoldKey(p);
  req.ttl_ms = ttl_ms;
  return req;
}

RoundRequest ReleaseRound(const HoldPlace& p, const std::string& token,
                          const std::string& drop_mark) {
  const std::string channel = scripts::ReleaseChannel(BaseKey(p));
  RoundRequest req;
  if (p.shape.kind == LockKind::kElection) {
    // The record goes first, only if it is this leader's (the mark).
    req = KindRound(RoundOp::kKindRelease, KindScript::kReleasePart, token);
    req.keys = {BaseKey(p), LeaderKey(p.key_prefix, p.name)};
    req.args = {channel, std::string(p.record)};
    req.key = BaseKey(p);
    req.wait_all = true;
    return req;
  }
  if (p.mode == HoldMode::kExclusive && drop_mark.empty()) return DeleteRound(BaseKey(p), token);
  if (p.mode == HoldMode::kShared) {
    req = KindRound(RoundOp::kKindRelease, KindScript::kReleaseShared, token);
    req.keys = {HoldKey(p)};
  } else {
    req = KindRound(RoundOp::kKindRelease, KindScript::kReleasePart, token);
    req.keys = {HoldKey(p), WriterWaitingKey(p.key_prefix, p.name)};
  }
  req.args = {channel};
  if (p.mode != HoldMode::kShared) req.args.push_back(drop_mark);
  req.key = HoldKey(p);
  req.wait_all = true;
  return req;
}

RoundRequest FenceRecordRound(const HoldPlace& p, const std::string& token, int64_t fence,
                              int needed) {
  RoundRequest req = KindRound(RoundOp::kKindFence, KindScript::kFenceRecord, token);
  req.keys = {BaseKey(p), FencedKeysOf(p).fence_key, LeaderKey(p.key_prefix, p.name)};
  req.args = {std::to_string(fence), std::string(p.record),
              scripts::ReleaseChannel(BaseKey(p))};
  req.key = BaseKey(p);
  req.fence = fence;
  req.needed = needed;
  return req;
}

RoundRequest ReadRecordRound(const std::string& key_prefix, const std::string& name) {
  RoundRequest req = KindRound(RoundOp::kKindRead, KindScript::kReadRecord, "");
  req.keys = {key_prefix + name, LeaderKey(key_prefix, name)};
  req.key = key_prefix + name;
  req.wait_all = true;
  return req;
}

}  // namespace lw
