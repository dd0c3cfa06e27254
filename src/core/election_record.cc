#include "core/election_record.h"

#include <charconv>
#include <utility>

#include "core/lock_kind.h"

namespace lw {
namespace {

// The whole number at the start of text up to the next separator; advances text past it.
std::optional<int64_t> TakeNumber(std::string_view& text) {
  const size_t sep = text.find(kKeyPartSeparator);
  if (sep == std::string_view::npos || sep == 0) return std::nullopt;
  int64_t n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + sep, n);
  if (ec != std::errc() || end != text.data() + sep || n < 0) return std::nullopt;
  text.remove_prefix(sep + 1);
  return n;
}

}  // namespace

std::string StoredRecord(std::string_view value, const ElectionRecord& record) {
  std::string out;
  out.reserve(value.size() + record.payload.size() + 48);
  out.append(value).push_back(kKeyPartSeparator);
  out.append(std::to_string(record.term)).push_back(kKeyPartSeparator);
  out.append(std::to_string(record.since_ms)).push_back(kKeyPartSeparator);
  out.append(record.payload);
  return out;
}

std::optional<ElectionRecord> ParseReadRecord(std::string_view text) {
  ElectionRecord out;
  const auto term = TakeNumber(text);
  if (!term || *term < 1) return std::nullopt;
  const auto since = TakeNumber(text);
  if (!since) return std::nullopt;
  out.term = *term;
  out.since_ms = *since;
  out.payload = std::string(text);
  return out;
}

std::optional<StoredElectionRecord> ParseStoredRecord(std::string_view stored) {
  const size_t sep = stored.find(kKeyPartSeparator);
  if (sep == std::string_view::npos || sep == 0) return std::nullopt;
  std::optional<ElectionRecord> record = ParseReadRecord(stored.substr(sep + 1));
  if (!record) return std::nullopt;
  return StoredElectionRecord{std::string(stored.substr(0, sep)), std::move(*record)};
}

}  // namespace lw
