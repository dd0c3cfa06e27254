#include "agent/handover_state.h"

#include "agent/handover_binary.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>

namespace lw::handover {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

LockKind KindNamed(const std::string& name) {
  if (name == NameOf(LockKind::kSemaphore)) return LockKind::kSemaphore;
  if (name == NameOf(LockKind::kElection)) return LockKind::kElection;
  if (name == NameOf(LockKind::kMutex)) return LockKind::kMutex;
  throw std::invalid_argument("unknown lock kind " + json(name).dump());
}

HoldMode ModeNamed(const std::string& name) {
  for (HoldMode m : {HoldMode::kExclusive, HoldMode::kShared, HoldMode::kPermit}) {
    if (name == NameOf(m)) return m;
  }
  throw std::invalid_argument("unknown hold mode " + json(name).dump());
}

int64_t Ns(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

Clock::time_point At(int64_t ns) {
  return Clock::time_point(std::chrono::duration_cast<Clock::duration>(std::chrono::nanoseconds(ns)));
}

json HoldJson(const HandedHold& h) {
  json j = {{"resource", h.resource},
            {"token", h.token},
            {"value", h.value},
            {"ttl_ms", h.ttl_ms},
            {"renew", h.renew},
            {"kind", NameOf(h.shape.kind)},
            {"permits", h.shape.permits},
            {"mode", NameOf(h.mode)},
            {"part", h.part},
            {"acquired_ns", Ns(h.acquired)},
            {"valid_until_ns", Ns(h.valid_until)}};
  if (h.fence) j["fence"] = *h.fence;
  if (!h.note.empty()) j["note"] = h.note;
  if (h.owner != 0) j["owner"] = h.owner;
  if (h.depth != 1) j["depth"] = h.depth;
  return j;
}

HandedHold HoldOf(const json& j) {
  HandedHold h;
  h.resource = j.at("resource").get<std::string>();
  h.token = j.at("token").get<std::string>();
  h.value = j.at("value").get<std::string>();
  h.ttl_ms = j.at("ttl_ms").get<int64_t>();
  h.renew = j.at("renew").get<bool>();
  h.shape = LockShape{KindNamed(j.at("kind").get<std::string>()), j.at("permits").get<int>()};
  h.mode = ModeNamed(j.at("mode").get<std::string>());
  h.part = j.at("part").get<int>();
  h.acquired = At(j.at("acquired_ns").get<int64_t>());
  h.valid_until = At(j.at("valid_until_ns").get<int64_t>());
  if (j.contains("fence")) h.fence = j.at("fence").get<int64_t>();
  if (j.contains("note")) h.note = j.at("note").get<std::string>();
  h.owner = j.value("owner", uint64_t{0});
  h.depth = j.value("depth", 1);
  return h;
}

json HoldsJson(const std::vector<HandedHold>& holds) {
  json out = json::array();
  for (const auto& h : holds) out.push_back(HoldJson(h));
  return out;
}

std::vector<HandedHold> HoldsOf(const json& j) {
  std::vector<HandedHold> out;
  for (const auto& h : j) out.push_back(HoldOf(h));
  return out;
}

}  // namespace

std::vector<int> Formats() {
  return {kFormatJson, kFormatBinary, kFormatPreCopied, kFormatReentrant};
}

int FormatFor(const std::vector<int>& theirs) {
  int best = 0;
  for (int f : Formats()) {
    if (std::find(theirs.begin(), theirs.end(), f) != theirs.end()) best = std::max(best, f);
  }
  return best;
}

std::string NotRead(int format) {
  std::string known;
  for (int f : Formats()) known += (known.empty() ? "" : ", ") + std::to_string(f);
  return "hand-over format " + std::to_string(format) + " is not one this build reads (" + known +
         ")";
}

std::string Encode(const State& state) {
  if (state.format >= kFormatBinary) {
    return EncodeBinary(state);
  }
  json sessions = json::array();
  for (const auto& s : state.sessions) {
    json asks = json::array();
    for (const auto& a : s.asks) asks.push_back({{"line", a.line}, {"age_ms", a.age_ms}});
    sessions.push_back({{"fd", s.fd},
                        {"input", s.input},
                        {"holds", HoldsJson(s.holds)},
                        {"asks", std::move(asks)},
                        {"observed", s.observed},
                        {"upgrade_id", s.upgrade_id}});
  }
  json leases = json::array();
  for (const auto& l : state.leases) {
    json creators = json::array();
    for (const auto& c : l.creators) {
      creators.push_back({{"resource", c.resource},
                          {"token", c.token},
                          {"pid", c.creator.pid},
                          {"uid", c.creator.uid},
                          {"gid", c.creator.gid},
                          {"cmdline", c.creator.cmdline}});
    }
    leases.push_back(
        {{"uid", l.uid}, {"holds", HoldsJson(l.holds)}, {"creators", std::move(creators)}});
  }
  return json{{"format", state.format},
              {"version", state.version},
              {"agent_id", state.agent_id},
              {"masters", state.masters},
              {"key_prefix", state.key_prefix},
              {"fence_prefix", state.fence_prefix},
              {"listener", state.listener},
              {"previous_pid", state.previous_pid},
              {"held_since_ns", state.held_since_ns},
              {"sessions", std::move(sessions)},
              {"leases", std::move(leases)}}
      .dump(-1, ' ', false, json::error_handler_t::replace);
}

std::variant<State, std::string> Decode(std::string_view text) {
  if (IsBinary(text)) return DecodeBinary(text);
  try {
    const json j = json::parse(text);
    State st;
    st.format = j.at("format").get<int>();
    if (st.format != kFormatJson) return NotRead(st.format);
    st.version = j.at("version").get<std::string>();
    st.agent_id = j.at("agent_id").get<std::string>();
    st.masters = j.at("masters").get<std::vector<std::string>>();
    st.key_prefix = j.at("key_prefix").get<std::string>();
    st.fence_prefix = j.at("fence_prefix").get<std::string>();
    st.listener = j.at("listener").get<int>();
    st.previous_pid = j.at("previous_pid").get<int>();
    st.held_since_ns = j.at("held_since_ns").get<int64_t>();
    for (const auto& s : j.at("sessions")) {
      SessionState ss;
      ss.fd = s.at("fd").get<int>();
      ss.input = s.at("input").get<std::string>();
      ss.holds = HoldsOf(s.at("holds"));
      for (const auto& a : s.at("asks")) {
        ss.asks.push_back({a.at("line").get<std::string>(), a.at("age_ms").get<int64_t>()});
      }
      ss.observed = s.at("observed").get<std::vector<std::string>>();
      ss.upgrade_id = s.at("upgrade_id").get<std::string>();
      st.sessions.push_back(std::move(ss));
    }
    for (const auto& l : j.at("leases")) {
      LeaseState ls;
      ls.uid = l.at("uid").get<uid_t>();
      ls.holds = HoldsOf(l.at("holds"));
      for (const auto& c : l.at("creators")) {
        ls.creators.push_back({c.at("resource").get<std::string>(),
                               c.at("token").get<std::string>(),
                               Peer{c.at("pid").get<int>(), c.at("uid").get<int>(),
                                    c.at("gid").get<int>(), c.at("cmdline").get<std::string>()}});
      }
      st.leases.push_back(std::move(ls));
    }
    return st;
  } catch (const std::exception& e) {
    return std::string("malformed hand-over state: ") + e.what();
  }
}

std::string Aged(std::string_view line, int64_t age_ms) {
  json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("wait_ms") || !j["wait_ms"].is_number_integer()) {
    return std::string(line);
  }
  j["wait_ms"] = std::max<int64_t>(0, j["wait_ms"].get<int64_t>() - age_ms);
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace lw::handover
