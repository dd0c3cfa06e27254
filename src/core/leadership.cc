#include "core/leadership.h"

#include <map>

namespace lw {

LeaderReading DecideLeader(const RecordAnswers& answers, int quorum) {
  LeaderReading out;
  // Record text -> counting masters that answered it. A text that is not a record names
  // nobody: it counts as an answer without a record.
  std::map<std::string, int> seen;
  int counting = 0;
  const size_t n = answers.values.size();
  for (size_t i = 0; i < n; ++i) {
    if (!answers.counts.empty() && (i >= answers.counts.size() || !answers.counts[i])) continue;
    ++counting;
    const bool nil = i < answers.nil.size() && answers.nil[i];
    if (answers.values[i]) {
      ++out.answered;
      if (ParseReadRecord(*answers.values[i])) ++seen[*answers.values[i]];
    } else if (nil) {
      ++out.answered;
    }
  }
  // The highest term among the records on a quorum (one read sees at most one: see the header).
  std::optional<ElectionRecord> best;
  for (const auto& [text, count] : seen) {
    out.agreeing = std::max(out.agreeing, count);
    if (count < quorum) continue;
    auto record = ParseReadRecord(text);
    if (!best || record->term > best->term) best = std::move(record);
  }
  if (best) {
    out.state = LeaderReading::State::kLeader;
    out.record = std::move(*best);
    return out;
  }
  const int missing = counting - out.answered;
  if (out.answered < quorum || out.agreeing + missing >= quorum) {
    out.state = LeaderReading::State::kUnknown;
  } else {
    out.state = LeaderReading::State::kNone;
  }
  return out;
}

void LeaderFeed::Start(const LeaderReading& reading) {
  leading_ = reading.state == LeaderReading::State::kLeader;
  term_ = leading_ ? reading.record.term : 0;
  interrupted_ = false;
}

std::optional<LeaderEvent> LeaderFeed::Next(const LeaderReading& reading) {
  switch (reading.state) {
    case LeaderReading::State::kUnknown:
      interrupted_ = true;
      return std::nullopt;
    case LeaderReading::State::kNone: {
      if (!leading_) return std::nullopt;  // still nobody; a gap shows at the next leader
      LeaderEvent event{std::nullopt, term_, interrupted_};
      leading_ = false;
      interrupted_ = false;
      return event;
    }
    case LeaderReading::State::kLeader:
      break;
  }
  const int64_t term = reading.record.term;
  if (term < term_) return std::nullopt;  // never back to a lower term
  if (term == term_ && leading_) {
    // The same leader: with terms strictly increasing, nobody else led in between.
    interrupted_ = false;
    return std::nullopt;
  }
  // A new leader, or the one told gone found again (a reading that said nobody while its hold
  // was still there on a quorum: possible only with clocks or masters misbehaving, so said).
  LeaderEvent event{reading.record, term, interrupted_ || term > term_ + 1 || term == term_};
  term_ = term;
  leading_ = true;
  interrupted_ = false;
  return event;
}

}  // namespace lw
