// NodeClient's lock scripts: every call is queued for the loop turn and leaves, with the
// turn's other calls to this master, as one command (redis/script_batch.h).

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <spdlog/spdlog.h>

#include <array>
#include <charconv>

#include "redis/kind_scripts.h"
#include "redis/node_client.h"
#include "redis/scripts.h"
#include "redis/uv_adapter.h"

namespace lw {
namespace {

// By NodeClient::Script (kind scripts in scripts::KindScript order after the first three).
constexpr std::array<NodeCommand, 3> kLockCommands = {
    NodeCommand::kDeleteIfHeld, NodeCommand::kExtendIfHeld, NodeCommand::kRaiseFence};

NodeCommand CommandOf(size_t index) {
  if (index < kLockCommands.size()) return kLockCommands[index];
  return static_cast<NodeCommand>(static_cast<size_t>(NodeCommand::kClaimExclusive) + index -
                                  kLockCommands.size());
}

const char* const* Bodies() {
  static const auto bodies = [] {
    std::array<const char*, 3 + static_cast<size_t>(scripts::KindScript::kCount)> b{
        scripts::kDeleteIfHeld, scripts::kExtendIfHeld, scripts::kRaiseFenceIfHeld};
    for (size_t i = 0; i < std::size(scripts::kKindScriptBodies); ++i) {
      b[3 + i] = scripts::kKindScriptBodies[i];
    }
    return b;
  }();
  return bodies.data();
}

std::string_view Decimal(char (&buf)[24], int64_t n) {
  const auto end = std::to_chars(buf, buf + sizeof buf, n).ptr;
  return {buf, static_cast<size_t>(end - buf)};
}

}  // namespace

const char* NodeClient::ScriptBody(size_t index) {
  static const std::string batch = BatchScriptBody({Bodies(), kScripts});
  return index == kBatchScript ? batch.c_str() : Bodies()[index];
}

void NodeClient::DeleteIfHeld(const std::string& key, const std::string& token,
                              ReplyHandler handler) {
  channel_.assign(scripts::kReleaseChannelPrefix);  // scripts::ReleaseChannel(key)
  channel_ += key;
  Enqueue(Script::kDeleteIfHeld, {key}, {token, channel_}, std::move(handler));
}

void NodeClient::ExtendIfHeld(const std::string& key, const std::string& token, int64_t ttl_ms,
                              ReplyHandler handler) {
  char buf[24];
  Enqueue(Script::kExtendIfHeld, {key}, {token, Decimal(buf, ttl_ms)}, std::move(handler));
}

void NodeClient::RaiseFenceIfHeld(const std::string& key, const std::string& fence_key,
                                  const std::string& token, int64_t fence, ReplyHandler handler) {
  char buf[24];
  Enqueue(Script::kRaiseFenceIfHeld, {key, fence_key}, {token, Decimal(buf, fence)},
          std::move(handler));
}

void NodeClient::SetIfAbsent(const std::string& key, std::string_view value, int64_t ttl_ms,
                             ReplyHandler handler) {
  redisAsyncContext* ac = conn_.context();
  if (state_ != State::kReady || ac == nullptr ||
      (ac->c.flags & (REDIS_DISCONNECTING | REDIS_FREEING)) != 0) {
    return FailSoon(std::move(handler));
  }
  char buf[24];
  const std::string_view ttl = Decimal(buf, ttl_ms);
  const char* argv[] = {"SET", key.data(), value.data(), "NX", "PX", ttl.data()};
  const size_t lens[] = {3, key.size(), value.size(), 2, 2, ttl.size()};
  auto p = std::make_unique<Pending>();
  p->handler = std::move(handler);
  p->command = NodeCommand::kSetIfAbsent;
  Send(6, argv, lens, std::move(p));
}

void NodeClient::RunKindScript(scripts::KindScript script, std::span<const std::string> keys,
                               std::string_view value, std::span<const std::string> args,
                               ReplyHandler handler) {
  constexpr size_t kWords = 16;  // more than any kind script takes
  std::array<std::string_view, kWords> key_views, arg_views;
  if (keys.size() > kWords || args.size() + 1 > kWords) {
    // A programming error (no kind script takes that many): never sent, answered unavailable.
    spdlog::error("internal: a kind script with {} keys and {} arguments", keys.size(),
                  args.size() + 1);
    return FailSoon(std::move(handler));
  }
  for (size_t i = 0; i < keys.size(); ++i) key_views[i] = keys[i];
  arg_views[0] = value;
  for (size_t i = 0; i < args.size(); ++i) arg_views[i + 1] = args[i];
  Enqueue(static_cast<size_t>(Script::kFirstKindScript) + static_cast<size_t>(script),
          {key_views.data(), keys.size()}, {arg_views.data(), args.size() + 1},
          std::move(handler));
}

void NodeClient::Enqueue(Script script, std::initializer_list<std::string_view> keys,
                         std::initializer_list<std::string_view> args, ReplyHandler handler) {
  Enqueue(static_cast<size_t>(script), {keys.begin(), keys.size()}, {args.begin(), args.size()},
          std::move(handler));
}

void NodeClient::Enqueue(size_t index, std::span<const std::string_view> keys,
                         std::span<const std::string_view> args, ReplyHandler handler) {
  redisAsyncContext* ac = conn_.context();
  // A context being torn down (its pending replies are being answered) takes no more.
  if (state_ != State::kReady || ac == nullptr ||
      (ac->c.flags & (REDIS_DISCONNECTING | REDIS_FREEING)) != 0) {
    return FailSoon(std::move(handler));
  }
  if (queued_.empty()) RequestWrite(ac);
  batch_.Add(index, keys, args);
  queued_.push_back({std::move(handler), CommandOf(index)});
  if (queued_.size() >= kMaxBatch) FlushBatch();
}

void NodeClient::FlushBatchOf(void* self) { static_cast<NodeClient*>(self)->FlushBatch(); }

void NodeClient::FlushBatch() {
  if (queued_.empty()) return;
  auto p = std::make_unique<Pending>();
  p->batch = std::move(batch_);
  p->calls = std::move(queued_);
  batch_.Clear();
  queued_.clear();
  queued_.reserve(p->calls.size());
  SendBatch(std::move(p), /*by_sha=*/true);
}

void NodeClient::SendBatch(std::unique_ptr<Pending> p, bool by_sha) {
  const size_t index = p->calls.size() == 1 ? p->batch.first_index() : kBatchScript;
  const std::string& sha = shas_[index];
  const bool use_sha = by_sha && !sha.empty();
  const std::string command = use_sha ? p->batch.Command("EVALSHA", sha)
                                      : p->batch.Command("EVAL", ScriptBody(index));
  redisAsyncContext* ac = conn_.context();
  p->owner = this;
  p->generation = generation_;
  Pending* raw = p.get();
  if (ac == nullptr ||
      redisAsyncFormattedCommand(ac, OnReply, raw, command.data(), command.size()) != REDIS_OK) {
    for (Call& call : p->calls) FailSoon(std::move(call.handler));
    return;
  }
  p.release();  // owned by hiredis until OnReply
  raw->sent_at = Clock::now();
  sent_.push_back(raw->sent_at);
}

// Every call gets its own answer: a batch's array element, or what the whole command got (an
// error, a lost connection). Elements are read one at a time: no copy of the whole array.
void NodeClient::AnswerBatch(std::unique_ptr<Pending> p, const redisReply* r) {
  if (r != nullptr && r->type == REDIS_REPLY_ERROR &&
      std::string_view(r->str, r->len).starts_with("NOSCRIPT") && state_ == State::kReady) {
    // The script cache was flushed (SCRIPT FLUSH, or a restart we have not noticed yet):
    // send the body once; EVAL caches it again for the next EVALSHA.
    return SendBatch(std::move(p), /*by_sha=*/false);
  }
  const size_t n = p->calls.size();
  const bool split = n > 1 && r != nullptr && r->type == REDIS_REPLY_ARRAY && r->elements == n;
  Reply whole;
  if (!split) {
    whole = ReadReply(r);
    if (n > 1 && whole.kind != Reply::Kind::kError && whole.kind != Reply::Kind::kDisconnected) {
      whole.kind = Reply::Kind::kError;
      whole.text = "lockwarden: a batch of " + std::to_string(n) +
                   " calls got an answer that is not an array of " + std::to_string(n);
      whole.elements.clear();
    }
  }
  const auto latency = Clock::now() - p->sent_at;
  Reply element;
  for (size_t i = 0; i < n; ++i) {
    if (split) element = ReadReply(r->element[i]);
    const Reply& own = split ? element : whole;
    if (own.kind == Reply::Kind::kDisconnected) {
      ReportError(NodeError::kDisconnected);
    } else {
      Answered(p->calls[i].command, latency, own);
    }
    p->calls[i].handler(own);
  }
}

void NodeClient::FailQueued() {
  std::vector<Call> calls;
  calls.swap(queued_);
  batch_.Clear();
  Reply unavailable;
  unavailable.kind = Reply::Kind::kUnavailable;
  unavailable.text = last_error_;
  for (Call& call : calls) {
    ReportError(NodeError::kUnavailable);
    call.handler(unavailable);
  }
}

}  // namespace lw
