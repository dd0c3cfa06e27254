#include "core/lock_kind.h"

#include <charconv>

namespace lw {
namespace {

constexpr std::string_view kSemaphoreMarker = "lockwarden:semaphore:";
constexpr std::string_view kPermitPart = "permit:";
constexpr std::string_view kReadersPart = "readers";
constexpr std::string_view kWaitingPart = "writer-waiting";
constexpr std::string_view kLeaderPart = "leader";
constexpr std::string_view kQueuePart = "queue";
constexpr std::string_view kQueueAlivePart = "queue-alive";
constexpr std::string_view kReservationPrefix = "lockwarden:reserved:";

std::string Join(std::string_view prefix, std::string_view name, std::string_view part) {
  std::string out;
  out.reserve(prefix.size() + name.size() + 1 + part.size() + 4);
  out.append(prefix).append(name).push_back(kKeyPartSeparator);
  out.append(part);
  return out;
}

// A whole number in [lo, hi] written without sign, leading zeros or anything after it.
std::optional<int> ReadCount(std::string_view text, int lo, int hi) {
  if (text.empty() || (text.size() > 1 && text[0] == '0')) return std::nullopt;
  int n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size() || n < lo || n > hi) {
    return std::nullopt;
  }
  return n;
}

}  // namespace

std::string LockShape::Describe() const {
  switch (kind) {
    case LockKind::kMutex:
      return "lock";
    case LockKind::kSemaphore:
      return "semaphore of " + std::to_string(permits) + (permits == 1 ? " permit" : " permits");
    case LockKind::kElection:
      return "election";
  }
  return "lock";
}

std::string LockShape::WithArticle() const {
  return (kind == LockKind::kElection ? "an " : "a ") + Describe();
}

std::string LockShape::Marker() const {
  if (kind == LockKind::kSemaphore) return std::string(kSemaphoreMarker) + std::to_string(permits);
  return "";
}

std::string Reservation(std::string_view agent) {
  return std::string(kReservationPrefix).append(agent);
}

bool IsReservation(std::string_view value) { return value.starts_with(kReservationPrefix); }

bool IsPlaceholder(std::string_view value) {
  return IsReservation(value) || value == kReadersMark;
}

std::optional<LockShape> ShapeOfMarker(std::string_view value) {
  if (!value.starts_with(kSemaphoreMarker)) return std::nullopt;
  const auto k = ReadCount(value.substr(kSemaphoreMarker.size()), 1, kMaxPermits);
  if (!k) return std::nullopt;
  return LockShape{LockKind::kSemaphore, *k};
}

std::string_view NameOf(HoldMode mode) {
  switch (mode) {
    case HoldMode::kExclusive:
      return "exclusive";
    case HoldMode::kShared:
      return "shared";
    case HoldMode::kPermit:
      return "permit";
  }
  return "exclusive";
}

std::string_view NameOf(LockKind kind) {
  switch (kind) {
    case LockKind::kMutex:
      return "mutex";
    case LockKind::kSemaphore:
      return "semaphore";
    case LockKind::kElection:
      return "election";
  }
  return "mutex";
}

std::string PermitKey(std::string_view prefix, std::string_view name, int permit) {
  return Join(prefix, name, std::string(kPermitPart) + std::to_string(permit));
}
std::string ReadersKey(std::string_view prefix, std::string_view name) {
  return Join(prefix, name, kReadersPart);
}
std::string WriterWaitingKey(std::string_view prefix, std::string_view name) {
  return Join(prefix, name, kWaitingPart);
}
std::string LeaderKey(std::string_view prefix, std::string_view name) {
  return Join(prefix, name, kLeaderPart);
}
std::string QueueKey(std::string_view prefix, std::string_view name) {
  return Join(prefix, name, kQueuePart);
}
std::string QueueAliveKey(std::string_view prefix, std::string_view name) {
  return Join(prefix, name, kQueueAlivePart);
}
std::string PermitFenceKey(std::string_view fence_prefix, std::string_view name, int permit) {
  return PermitKey(fence_prefix, name, permit);
}

std::optional<KeyPart> ParseLockKey(std::string_view prefix, std::string_view key) {
  if (!key.starts_with(prefix)) return std::nullopt;
  key.remove_prefix(prefix.size());
  const size_t sep = key.find(kKeyPartSeparator);
  KeyPart out;
  out.resource = std::string(key.substr(0, sep));
  if (out.resource.empty()) return std::nullopt;
  if (sep == std::string_view::npos) return out;
  const std::string_view part = key.substr(sep + 1);
  if (part == kReadersPart) {
    out.part = KeyPart::Part::kReaders;
  } else if (part == kWaitingPart) {
    out.part = KeyPart::Part::kWriterWaiting;
  } else if (part == kLeaderPart) {
    out.part = KeyPart::Part::kLeader;
  } else if (part == kQueuePart) {
    out.part = KeyPart::Part::kQueue;
  } else if (part == kQueueAlivePart) {
    out.part = KeyPart::Part::kQueueAlive;
  } else if (part.starts_with(kPermitPart)) {
    const auto i = ReadCount(part.substr(kPermitPart.size()), 0, kMaxPermits - 1);
    if (!i) return std::nullopt;
    out.part = KeyPart::Part::kPermit;
    out.permit = *i;
  } else {
    return std::nullopt;
  }
  return out;
}

}  // namespace lw
