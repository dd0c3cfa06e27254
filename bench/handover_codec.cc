// The in-place upgrade's state codec alone (docs/upgrade.md): encode and decode time and size
// of a state of S sessions holding L renewed locks each, in every format this build writes.
// No agent, no masters; run by bench/run.sh's upgrade part before the end-to-end hand-over.
//
//   lw_bench_handover_codec [SESSIONS=1000] [LOCKS=100]

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <variant>

#include "agent/handover_state.h"

namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// Fields the size of a real agent's: a 32-hex token, a value with the agent id, a fence.
lw::handover::State Shaped(int sessions, int locks) {
  lw::handover::State st;
  st.version = "bench";
  st.agent_id = "c075dc218fc50dd3";
  const auto now = Clock::now();
  for (int s = 0; s < sessions; ++s) {
    lw::handover::SessionState ss;
    ss.fd = s + 1;
    for (int l = 0; l < locks; ++l) {
      lw::HandedHold h;
      h.resource = "upgrade/" + std::to_string(s) + "/" + std::to_string(l);
      h.token = std::string(32, 'a' + static_cast<char>(l % 6));
      h.value = "c075dc218fc50dd3:" + h.token;
      h.ttl_ms = 30'000;
      h.renew = true;
      h.fence = 1'000'000 + l;
      h.acquired = now;
      h.valid_until = now + std::chrono::seconds(20);
      ss.holds.push_back(std::move(h));
    }
    st.sessions.push_back(std::move(ss));
  }
  return st;
}

}  // namespace

int main(int argc, char** argv) {
  const int sessions = argc > 1 ? std::atoi(argv[1]) : 1000;
  const int locks = argc > 2 ? std::atoi(argv[2]) : 100;
  lw::handover::State st = Shaped(sessions, locks);
  for (int format : lw::handover::Formats()) {
    st.format = format;
    auto t = Clock::now();
    const std::string text = lw::handover::Encode(st);
    const double encode_ms = MsSince(t);
    t = Clock::now();
    const auto back = lw::handover::Decode(text);
    const double decode_ms = MsSince(t);
    if (!std::holds_alternative<lw::handover::State>(back)) {
      std::fprintf(stderr, "format %d: %s\n", format, std::get<std::string>(back).c_str());
      return 1;
    }
    std::printf("hand-over state, format %d, %d sessions x %d locks: %.1f MB, encode %.1f ms, "
                "decode %.1f ms\n",
                format, sessions, locks, static_cast<double>(text.size()) / 1e6, encode_ms,
                decode_ms);
  }
  return 0;
}
