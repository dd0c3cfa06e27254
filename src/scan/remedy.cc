#include "scan/remedy.h"

#include "scan/sync_redis.h"

namespace lw {
namespace {

// Returns 1 when done, 0 when the key is gone or has a TTL by now.
constexpr const char* kRemedyScript = R"lua(
if redis.call('PTTL', KEYS[1]) ~= -1 then return 0 end
if ARGV[1] == 'delete' then
  redis.call('DEL', KEYS[1])
else
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 1
)lua";

}  // namespace

std::string_view RemedyResultName(RemedyResult result) {
  switch (result) {
    case RemedyResult::kDone:
      return "done";
    case RemedyResult::kStale:
      return "stale";
    case RemedyResult::kError:
      return "error";
  }
  return "error";
}

Remedy RemedyLeak(const MasterAddress& master, const std::string& key, LeakAction action,
                  int64_t ttl_ms, std::chrono::milliseconds timeout) {
  auto opened = SyncRedis::Open(master, timeout, timeout);
  if (auto* error = std::get_if<std::string>(&opened)) return {RemedyResult::kError, *error};
  auto& conn = std::get<std::unique_ptr<SyncRedis>>(opened);
  const bool del = action == LeakAction::kDelete;
  auto reply = conn->Run({"EVAL", kRemedyScript, "1", key, del ? "delete" : "expire",
                          std::to_string(ttl_ms)});
  if (auto* error = std::get_if<std::string>(&reply)) {
    return {RemedyResult::kError, master.Display() + ": " + *error};
  }
  const SyncReply& r = std::get<SyncReply>(reply);
  if (r.kind == SyncReply::Kind::kError) {
    return {RemedyResult::kError, master.Display() + ": " + r.text};
  }
  if (r.kind == SyncReply::Kind::kInteger && r.integer == 1) {
    return {RemedyResult::kDone, del ? "deleted" : "TTL set to " + std::to_string(ttl_ms) + " ms"};
  }
  return {RemedyResult::kStale,
          "the key is gone or has a TTL now; nothing was changed (it is no longer a leak)"};
}

}  // namespace lw
