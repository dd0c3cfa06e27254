#include "protocol/hold_json.h"

#include <optional>
#include <string>
#include <string_view>

#include "core/quote.h"

namespace lw::protocol {
namespace {

using Json = nlohmann::ordered_json;

// Which wires carry a field.
using Wires = unsigned;
constexpr Wires Bit(HoldWire wire) { return 1u << static_cast<unsigned>(wire); }
constexpr Wires kSocket = Bit(HoldWire::kSocket);
constexpr Wires kReport = Bit(HoldWire::kReport);
constexpr Wires kAdmin = Bit(HoldWire::kAdmin);
constexpr Wires kFleet = Bit(HoldWire::kFleet);
constexpr Wires kEveryWire = kSocket | kReport | kAdmin | kFleet;
constexpr Wires kCompact = kSocket | kReport;

// The fields of one hold for one wire, in the order they are put.
class HoldOut {
 public:
  HoldOut(HoldWire wire, Json& out) : wire_(Bit(wire)), out_(out) {}

  // `value` under `name` on `wires`.
  template <typename T>
  void Put(const char* name, const T& value, Wires wires = kEveryWire) {
    if ((wires & wire_) != 0) out_[name] = value;
  }
  // A field compact wires leave out at `absent`: their readers take its absence for it.
  template <typename T>
  void Unless(const char* name, const T& value, const T& absent, Wires wires = kEveryWire) {
    if ((wires & wire_) == 0 || ((wire_ & kCompact) != 0 && value == absent)) return;
    out_[name] = value;
  }
  // A field that has a value only for some holds: compact wires leave it out without one, the
  // others write null.
  void Maybe(const char* name, std::optional<int> value, Wires wires = kEveryWire) {
    if ((wires & wire_) == 0 || (!value && (wire_ & kCompact) != 0)) return;
    out_[name] = value ? Json(*value) : Json(nullptr);
  }

 private:
  Wires wire_;
  Json& out_;
};

// `local`: the agent's own view of the hold (session, held_ms, validity, holders), for the
// socket and the admin wires; null for a hold read from a report.
Json Write(const Hold& h, const LockView* local, HoldWire wire, int64_t at_unix_ms) {
  Json out = Json::object();
  HoldOut o(wire, out);
  const bool permit = h.mode == HoldMode::kPermit;
  std::string_view cmdline = h.holder.cmdline;
  if (wire == HoldWire::kReport) cmdline = ShortenUtf8(cmdline, kMaxReportedCmdlineBytes);

  o.Put("resource", h.resource);
  if (local != nullptr) o.Put("session", local->session, kSocket | kAdmin);
  o.Put("pid", h.holder.pid);
  if (h.holder.actor_pid >= 0 && h.holder.actor_pid != h.holder.pid) {
    o.Put("actor_pid", h.holder.actor_pid, kReport | kFleet);
  }
  o.Put("uid", h.holder.uid);
  o.Put("gid", h.holder.gid, kAdmin);
  o.Put("cmdline", std::string(cmdline), kReport | kAdmin | kFleet);
  if (local != nullptr) o.Put("held_ms", local->held_ms, kSocket | kAdmin);
  o.Put("held_ms", HeldMsAt(h, at_unix_ms), kFleet);
  o.Put("held_since_unix_ms", h.held_since_unix_ms, kReport);
  o.Put("held_since_ms", h.held_since_unix_ms, kFleet);
  if (local != nullptr) o.Put("validity_ms", local->validity_ms, kSocket | kAdmin);
  o.Put("ttl_ms", h.ttl_ms, kReport | kAdmin | kFleet);
  o.Put("renew", h.renew);
  // Null when not fenced, on the report too: older readers look for it.
  o.Put("fence", h.fence ? Json(*h.fence) : Json(nullptr), kReport | kFleet);
  o.Put("waiters", h.waiters);
  o.Put("kind", std::string(NameOf(h.kind)), kAdmin);
  o.Unless("mode", std::string(NameOf(h.mode)), std::string(NameOf(HoldMode::kExclusive)));
  o.Put("election", h.election ? LeaderJson(*h.election) : Json(nullptr), kAdmin | kFleet);
  o.Maybe("permits", permit && h.permits > 0 ? std::optional<int>(h.permits) : std::nullopt);
  o.Maybe("permit", permit && h.permit >= 0 ? std::optional<int>(h.permit) : std::nullopt);
  if (local != nullptr) o.Put("holders", local->holds, kAdmin);
  o.Unless("detached", h.detached, false);
  return out;
}

}  // namespace

Json HoldJson(const Hold& hold, HoldWire wire, int64_t at_unix_ms) {
  return Write(hold, nullptr, wire, at_unix_ms);
}

Json HoldJson(const LockView& lock, HoldWire wire) { return Write(lock, &lock, wire, 0); }

Hold ReadHold(JsonFields& f) {
  Hold h;
  h.resource = f.Text("resource", kMaxReportedResourceBytes);
  h.holder.pid = f.Small("pid", -1);
  h.holder.actor_pid = f.SmallOr("actor_pid", -1);
  h.holder.uid = f.Small("uid", -1);
  h.holder.cmdline = f.Text("cmdline", kMaxReportedCmdlineBytes);
  h.held_since_unix_ms = f.Ms("held_since_unix_ms");
  h.ttl_ms = f.Ms("ttl_ms");
  h.renew = f.Bool("renew");
  h.fence = f.MaybeInt("fence");
  h.waiters = f.Small("waiters", 0);
  ReadMode(f, h.mode, h.permits, &h.permit);
  h.detached = f.BoolOr("detached", false);
  return h;
}

void ReadMode(JsonFields& f, HoldMode& mode, int& permits, int* permit) {
  const std::optional<std::string> name = f.MaybeText("mode", 16);
  mode = HoldMode::kExclusive;
  if (!name || *name == NameOf(HoldMode::kExclusive)) return;
  if (*name == NameOf(HoldMode::kShared)) {
    mode = HoldMode::kShared;
    return;
  }
  f.Require(*name == NameOf(HoldMode::kPermit));
  mode = HoldMode::kPermit;
  permits = static_cast<int>(f.Int("permits", 1, kMaxPermits));
  if (permit != nullptr) {
    *permit = static_cast<int>(f.Int("permit", 0, kMaxPermits - 1));
    f.Require(*permit < permits);
  }
}

Json LeaderJson(const ElectionRecord& record) {
  const Json payload = Json::parse(record.payload, nullptr, /*allow_exceptions=*/false);
  const auto field = [&payload](const char* name, bool text) -> Json {
    if (!payload.is_object()) return nullptr;
    const auto it = payload.find(name);
    if (it == payload.end() || !(text ? it->is_string() : it->is_number_integer())) return nullptr;
    return *it;
  };
  return {{"term", record.term},
          {"since_unix_ms", record.since_ms},
          {"value", field("value", true)},
          {"agent", field("agent", true)},
          {"host", field("host", true)},
          {"pid", field("pid", false)}};
}

}  // namespace lw::protocol
