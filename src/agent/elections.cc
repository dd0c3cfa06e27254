#include "agent/elections.h"

#include <utility>

#include "locking/claims.h"
#include "protocol/messages.h"

namespace lw {
namespace {

std::optional<protocol::LeaderView> ViewOf(const std::optional<ElectionRecord>& record) {
  if (!record) return std::nullopt;
  return protocol::LeaderViewOf(*record);
}

}  // namespace

Elections::Elections(uv_loop_t* loop, std::vector<Node*> nodes, SessionTable& sessions,
                     ElectionOptions options, Push push)
    : loop_(loop),
      sessions_(sessions),
      options_(std::move(options)),
      push_(std::move(push)),
      rounds_(loop, std::move(nodes), options_.node_timeout_ms) {}

Elections::~Elections() { Stop(); }

std::string Elections::CandidatePayload(const std::string& value, int64_t pid) const {
  return protocol::EncodeCandidate(value, options_.agent_id, options_.host, pid);
}

void Elections::Read(const std::string& name, ReadDone done) {
  // Quarantined masters' answers do not count (core/leadership.h), as of when the read starts.
  std::vector<bool> counts;
  for (const Node* n : rounds_.nodes()) counts.push_back(n->votes_count());
  rounds_.Run(ReadRecordRound(options_.key_prefix, name),
              [this, counts = std::move(counts), done = std::move(done)](const RoundResult& res) {
                const LeaderReading reading = DecideLeader(
                    RecordAnswers{res.values, res.read_nil, counts}, rounds_.quorum());
                if (options_.stats != nullptr) options_.stats->reads[reading.state].Inc();
                done(reading);
              });
}

Failure Elections::Undecided(const LeaderReading& reading) const {
  const std::string answered = std::to_string(reading.answered) + " of " +
                               std::to_string(rounds_.size()) + " masters answered the leader read";
  const std::string quorum = " (a quorum is " + std::to_string(rounds_.quorum()) + ")";
  if (reading.answered < rounds_.quorum()) {
    return {ErrorCode::kNoQuorum, answered + quorum + ": cannot tell who leads; check `health`"};
  }
  return {ErrorCode::kNoQuorum,
          answered + " and at most " + std::to_string(reading.agreeing) +
              " of them agree on a leader" + quorum +
              ": the masters that did not answer could change who leads; try again"};
}

std::optional<Failure> Elections::Observe(SessionId session, const std::string& name,
                                          ObserveDone done) {
  if (stopped_) return Failure{ErrorCode::kShuttingDown, "the agent is stopping"};
  std::set<std::string>& names = sessions_.Open(session).observed;
  if (names.count(name) == 0 && names.size() >= options_.max_observed_per_session) {
    return Failure{ErrorCode::kTooMany,
                   "this connection observes " + std::to_string(names.size()) +
                       " elections, the most one connection may (" +
                       std::to_string(options_.max_observed_per_session) +
                       ", max_observations_per_session); unobserve one first"};
  }
  names.insert(name);
  auto [it, fresh] = watched_.try_emplace(name);
  Watched& w = it->second;
  if (fresh) {
    if (options_.stats != nullptr) options_.stats->observed.Set(static_cast<double>(watched_.size()));
    w.id = next_watched_id_++;
    if (options_.watch != nullptr) options_.watch->Watch(options_.key_prefix + name);
    w.poll = std::make_unique<Timer>(loop_);
    w.poll->StartRepeat(options_.poll_ms, [this, name] {
      if (auto found = watched_.find(name); found != watched_.end()) Trigger(name, found->second);
    });
  }
  Observer& o = w.observers[session];
  if (o.started) o = Observer{};  // observed again: start over from a new reply
  o.first_read = w.reads_started + 1;
  o.waiting.push_back(std::move(done));
  Trigger(name, w);
  return std::nullopt;
}

bool Elections::Unobserve(SessionId session, const std::string& name) {
  const ClientSession* s = sessions_.Find(session);
  if (s == nullptr || s->observed.count(name) == 0) return false;
  std::vector<ObserveDone> waiting;
  if (auto it = watched_.find(name); it != watched_.end()) {
    if (auto o = it->second.observers.find(session); o != it->second.observers.end()) {
      waiting = std::move(o->second.waiting);
    }
  }
  Drop(session, name);
  for (auto& done : waiting) {
    done(Failure{ErrorCode::kBadRequest,
                 "unobserve came before this observe's first reading: not observing"});
  }
  return true;
}

void Elections::CloseSession(SessionId session) {
  const ClientSession* s = sessions_.Find(session);
  if (s == nullptr) return;
  const std::set<std::string> names = s->observed;
  for (const auto& name : names) Drop(session, name);
}

void Elections::Announced(const std::string& key) {
  if (stopped_ || !key.starts_with(options_.key_prefix)) return;
  const std::string name = key.substr(options_.key_prefix.size());
  if (auto it = watched_.find(name); it != watched_.end()) Trigger(name, it->second);
}

void Elections::Stop() {
  if (stopped_) return;
  stopped_ = true;
  for (auto& [name, w] : watched_) {
    if (options_.watch != nullptr) options_.watch->Unwatch(options_.key_prefix + name);
  }
  watched_.clear();
  sessions_.ForEach([](ClientSession& s) { s.observed.clear(); });
  if (options_.stats != nullptr) options_.stats->observed.Set(0);
}

void Elections::Trigger(const std::string& name, Watched& w) {
  if (w.reading) {
    w.again = true;
  } else {
    StartRead(name, w);
  }
}

void Elections::StartRead(const std::string& name, Watched& w) {
  w.reading = true;
  w.again = false;
  const uint64_t seq = ++w.reads_started;
  Read(name, [this, name, id = w.id, seq](const LeaderReading& reading) {
    OnRead(name, id, seq, reading);
  });
}

void Elections::OnRead(const std::string& name, uint64_t watched_id, uint64_t seq,
                       const LeaderReading& reading) {
  if (stopped_) return;
  auto it = watched_.find(name);
  if (it == watched_.end() || it->second.id != watched_id) return;  // no longer observed
  Watched& w = it->second;
  w.reading = false;
  // What goes out is gathered first and sent after the state is settled: sending may close a
  // session, which comes back here (CloseSession).
  std::vector<std::pair<std::vector<ObserveDone>, std::variant<LeaderReading, Failure>>> replies;
  std::vector<std::pair<SessionId, std::string>> events;
  std::vector<SessionId> undecided;
  for (auto& [session, o] : w.observers) {
    if (o.first_read > seq) continue;  // joined after this read started
    if (!o.started) {
      if (reading.state == LeaderReading::State::kUnknown) {
        replies.emplace_back(std::move(o.waiting), Undecided(reading));
        undecided.push_back(session);
        continue;
      }
      o.started = true;
      o.feed.Start(reading);
      replies.emplace_back(std::move(o.waiting), reading);
      o.waiting.clear();
      continue;
    }
    if (auto event = o.feed.Next(reading)) {
      if (options_.stats != nullptr) {
        options_.stats->events.Inc();
        if (event->missed) options_.stats->events_missed.Inc();
      }
      events.emplace_back(session, protocol::EncodeLeaderEvent(name, ViewOf(event->leader),
                                                               event->term, event->missed));
    }
  }
  if (w.again) StartRead(name, w);
  for (SessionId session : undecided) Drop(session, name);
  for (auto& [dones, result] : replies) {
    for (auto& done : dones) done(result);
  }
  for (auto& [session, line] : events) push_(session, std::move(line));
}

void Elections::Drop(SessionId session, const std::string& name) {
  if (ClientSession* s = sessions_.Find(session)) s->observed.erase(name);
  auto it = watched_.find(name);
  if (it == watched_.end()) return;
  it->second.observers.erase(session);
  if (!it->second.observers.empty()) return;
  if (options_.watch != nullptr) options_.watch->Unwatch(options_.key_prefix + name);
  watched_.erase(it);  // a read in flight ends unheeded (OnRead checks the id)
  if (options_.stats != nullptr) options_.stats->observed.Set(static_cast<double>(watched_.size()));
}

}  // namespace lw
