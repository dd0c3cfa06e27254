// TEMPORARY (branch i17-agent only; the lead deletes this file at merge): just enough of the
// fleet room for the agent to link before the fleet room's implementations land. The presence
// and the reader do nothing; the revoke order's JSON is real, so that the agent's revoke
// channel can be tested end to end.
#include <nlohmann/json.hpp>

#include "fleet/presence.h"
#include "fleet/reader.h"
#include "fleet/records.h"
#include "fleet/revoke.h"

namespace lw::fleet {

FleetPresence::FleetPresence(PresenceSettings settings, ReportFn report, FleetStats* stats)
    : settings_(std::move(settings)), report_(std::move(report)), stats_(stats) {}
FleetPresence::~FleetPresence() { Stop(); }
void FleetPresence::Start() {}
void FleetPresence::Stop() {}

FleetReader::FleetReader(ReaderSettings settings, FleetStats* stats)
    : settings_(std::move(settings)), stats_(stats) {}
FleetReader::~FleetReader() { Stop(); }
void FleetReader::Start() {}
void FleetReader::Stop() {}
std::shared_ptr<const FleetView> FleetReader::View(int64_t, std::chrono::milliseconds) {
  return nullptr;
}
std::shared_ptr<const FleetView> FleetReader::Latest() const { return nullptr; }
void FleetReader::KeepFresh(bool on) {
  std::lock_guard lock(mu_);
  keep_fresh_ = on;
}

RevokeResult RevokeInFleet(const RevokeRequest&) {
  RevokeResult r;
  r.error = "the fleet revoke is not built in this branch";
  return r;
}

std::string Encode(const RevokeOrder& r) {
  return nlohmann::json{{"key", r.key}, {"value", r.value}, {"by", r.by}}.dump();
}

std::optional<RevokeOrder> DecodeRevokeOrder(std::string_view text) {
  if (text.size() > kMaxEntryBytes) return std::nullopt;
  const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  for (const char* field : {"key", "value", "by"}) {
    if (!j.contains(field) || !j[field].is_string()) return std::nullopt;
  }
  return RevokeOrder{j["key"], j["value"], j["by"]};
}

}  // namespace lw::fleet
