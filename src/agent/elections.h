#pragma once
// Elections: reading who leads an election, and following it for the sessions that observe it
// (docs/protocol.md "Elections"). Campaigning is the engine's (an election is a lock of kind
// kElection); this part only reads the leader's record from every master (its own Rounds, so
// reads never wait behind the engine's rounds) and decides with DecideLeader
// (core/leadership.h).
//
// Observing a name: its release announcements are watched (ReleaseWatch; every grant's phase 2
// and every release of the name announces), and each announcement starts a read; announcements
// arriving while a read is in flight make one more read after it (a burst, one per master,
// costs two reads). A timer reads again every poll_ms, the fallback for what announcements miss
// (a hold that expired, a subscription that was down). One read per name is in flight at a
// time and each observer's LeaderFeed gets them in order, so its events come in term order.
// Loop thread only.

#include <uv.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "agent/election_stats.h"
#include "core/client_session.h"
#include "core/defaults.h"
#include "core/leadership.h"
#include "core/result.h"
#include "core/session_id.h"
#include "locking/rounds.h"
#include "redis/node.h"
#include "redis/release_watch.h"
#include "redis/timer.h"

namespace lw {

struct ElectionOptions {
  std::string key_prefix = kDefaultKeyPrefix;
  int64_t node_timeout_ms = kDefaultNodeTimeoutMs;
  int64_t poll_ms = 1'000;  // election_poll_ms
  size_t max_observed_per_session = 64;  // max_observations_per_session
  ReleaseWatch* watch = nullptr;  // not owned; null: polling only
  ElectionStats* stats = nullptr;  // not owned; null: nothing counted
  // Who campaigns through this agent, for the candidates' payloads.
  std::string agent_id;
  std::string host;
};

class Elections {
 public:
  // Sends an event line to a session (it may be gone: then nothing).
  using Push = std::function<void(SessionId session, std::string line)>;
  using ReadDone = std::function<void(const LeaderReading& reading)>;
  using ObserveDone = std::function<void(const std::variant<LeaderReading, Failure>& result)>;

  // nodes: not owned, must outlive this (and stop before it is destroyed, failing reads in
  // flight into it). sessions: not owned, must outlive this; each session's observed names
  // are kept in its object (ClientSession::observed).
  Elections(uv_loop_t* loop, std::vector<Node*> nodes, SessionTable& sessions,
            ElectionOptions options, Push push);
  ~Elections();
  Elections(const Elections&) = delete;
  Elections& operator=(const Elections&) = delete;

  // The payload a campaign of `value` by process `pid` through this agent stores.
  std::string CandidatePayload(const std::string& value, int64_t pid) const;

  // Reads `name`'s leader from every master; `done` runs later, on the loop.
  void Read(const std::string& name, ReadDone done);
  // The failure a reading that could not decide answers (no_quorum, saying what answered).
  Failure Undecided(const LeaderReading& reading) const;

  // Follows `name` for the session: `done` gets the first reading (from a read started after
  // this call), which the reply carries; changes after it are pushed as `leader` events. A
  // reading that cannot decide fails it with no_quorum and the session does not observe. An
  // observe of a name the session observes already starts it over. Refused at once (done is
  // not called) with too_many beyond max_observed_per_session names (the message names the
  // setting max_observations_per_session), shutting_down once stopped.
  std::optional<Failure> Observe(SessionId session, const std::string& name, ObserveDone done);
  // False when the session did not observe `name`.
  bool Unobserve(SessionId session, const std::string& name);
  // The session is gone: its observations end (an unanswered observe is not answered).
  void CloseSession(SessionId session);

  // A release or change of `key` was announced on a master (ReleaseWatch's handler).
  void Announced(const std::string& key);

  // No more reads or events: timers stopped, watches ended. Reads in flight end unheeded.
  void Stop();

 private:
  struct Observer {
    uint64_t first_read = 0;  // the first read whose reading it may get
    bool started = false;     // the reply went out; readings go to its feed
    LeaderFeed feed;
    std::vector<ObserveDone> waiting;  // observes not answered yet (until started)
  };
  struct Watched {
    uint64_t id = 0;  // tells a read's answer for an earlier Watched of the same name
    std::unordered_map<SessionId, Observer> observers;
    bool reading = false;
    bool again = false;        // read again once the read in flight ends
    uint64_t reads_started = 0;
    std::unique_ptr<Timer> poll;
  };

  void Trigger(const std::string& name, Watched& w);
  void StartRead(const std::string& name, Watched& w);
  void OnRead(const std::string& name, uint64_t watched_id, uint64_t seq,
              const LeaderReading& reading);
  // The session no longer observes `name`; the last observer gone, the name is not watched.
  void Drop(SessionId session, const std::string& name);

  uv_loop_t* loop_;
  SessionTable& sessions_;
  ElectionOptions options_;
  Push push_;
  Rounds rounds_;
  std::unordered_map<std::string, Watched> watched_;                    // by name
  uint64_t next_watched_id_ = 1;
  bool stopped_ = false;
};

}  // namespace lw
