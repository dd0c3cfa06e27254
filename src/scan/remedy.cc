#include "scan/remedy.h"

#include "redis/blocking_connection.h"
#include "redis/scripts.h"

namespace lw {

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
  auto opened = BlockingConnection::Open(master, timeout, timeout);
  if (auto* error = std::get_if<std::string>(&opened)) return {RemedyResult::kError, *error};
  auto& conn = std::get<std::unique_ptr<BlockingConnection>>(opened);
  const bool del = action == LeakAction::kDelete;
  auto reply = conn->Run({"EVAL", scripts::kRemedyLeak, "1", key, del ? "delete" : "expire",
                          std::to_string(ttl_ms)});
  if (auto* error = std::get_if<std::string>(&reply)) {
    return {RemedyResult::kError, master.Display() + ": " + *error};
  }
  const Reply& r = std::get<Reply>(reply);
  if (r.kind == Reply::Kind::kError) {
    return {RemedyResult::kError, master.Display() + ": " + r.text};
  }
  if (r.kind == Reply::Kind::kInteger && r.integer == 1) {
    return {RemedyResult::kDone, del ? "deleted" : "TTL set to " + std::to_string(ttl_ms) + " ms"};
  }
  return {RemedyResult::kStale,
          "the key is gone or has a TTL now; nothing was changed (it is no longer a leak)"};
}

}  // namespace lw
