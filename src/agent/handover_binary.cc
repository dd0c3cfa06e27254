#include "agent/handover_binary.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>

namespace lw::handover {
namespace {

using SteadyClock = std::chrono::steady_clock;

class BinaryWriter {
 public:
  explicit BinaryWriter(std::string& out) : out_(out) {}
  void I64(int64_t v) { Raw(&v, sizeof v); }
  void I32(int32_t v) { Raw(&v, sizeof v); }
  void U8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void Str(std::string_view s) {
    I32(static_cast<int32_t>(s.size()));
    out_.append(s);
  }
  template <typename T, typename F>
  void List(const std::vector<T>& items, F&& each) {
    I32(static_cast<int32_t>(items.size()));
    for (const auto& item : items) each(item);
  }

 private:
  void Raw(const void* p, size_t n) {  // the host's byte order: both ends are this host
    out_.append(static_cast<const char*>(p), n);
  }
  std::string& out_;
};

// Every read checks the bounds; a short or inconsistent record throws std::runtime_error.
class BinaryReader {
 public:
  explicit BinaryReader(std::string_view in) : in_(in) {}
  int64_t I64() { return Fixed<int64_t>(); }
  int32_t I32() { return Fixed<int32_t>(); }
  bool U8() { return Take(1)[0] != 0; }
  std::string Str() { return std::string(Take(Count())); }
  // A list's count, checked against what is left (each item takes at least one byte).
  size_t Count() {
    const int32_t n = I32();
    if (n < 0 || static_cast<size_t>(n) > in_.size() - at_) throw std::runtime_error("bad count");
    return static_cast<size_t>(n);
  }
  bool done() const { return at_ == in_.size(); }
  // The next I32, left to be read.
  int32_t PeekI32() {
    const size_t at = at_;
    const int32_t v = I32();
    at_ = at;
    return v;
  }

 private:
  template <typename T>
  T Fixed() {
    T v;
    std::memcpy(&v, Take(sizeof v).data(), sizeof v);
    return v;
  }
  std::string_view Take(size_t n) {
    if (n > in_.size() - at_) throw std::runtime_error("truncated");
    auto s = in_.substr(at_, n);
    at_ += n;
    return s;
  }
  std::string_view in_;
  size_t at_ = 0;
};

int64_t SinceEpochNs(SteadyClock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

SteadyClock::time_point SteadyAt(int64_t ns) {
  return SteadyClock::time_point(
      std::chrono::duration_cast<SteadyClock::duration>(std::chrono::nanoseconds(ns)));
}

template <typename E, size_t N>
E EnumNamed(const std::string& name, const E (&all)[N], const char* what) {
  for (E e : all) {
    if (name == NameOf(e)) return e;
  }
  throw std::runtime_error(std::string("unknown ") + what + " " + name);
}

void WriteHold(BinaryWriter& w, const HandedHold& h, int format) {
  if (format >= kFormatPreCopied) w.I64(static_cast<int64_t>(h.serial));
  w.Str(h.resource);
  w.Str(h.token);
  w.Str(h.value);
  w.I64(h.ttl_ms);
  w.U8(h.renew);
  w.U8(h.fence.has_value());
  w.I64(h.fence.value_or(0));
  w.Str(NameOf(h.shape.kind));
  w.I32(h.shape.permits);
  w.Str(NameOf(h.mode));
  w.I32(h.part);
  w.Str(h.note);
  w.I64(SinceEpochNs(h.acquired));
  w.I64(SinceEpochNs(h.valid_until));
  if (format >= kFormatReentrant) {
    w.I64(static_cast<int64_t>(h.owner));
    w.I32(h.depth);
  }
}

HandedHold ReadHold(BinaryReader& r, int format) {
  static constexpr LockKind kKinds[] = {LockKind::kMutex, LockKind::kSemaphore,
                                        LockKind::kElection};
  static constexpr HoldMode kModes[] = {HoldMode::kExclusive, HoldMode::kShared,
                                        HoldMode::kPermit};
  HandedHold h;
  if (format >= kFormatPreCopied) h.serial = static_cast<uint64_t>(r.I64());
  h.resource = r.Str();
  h.token = r.Str();
  h.value = r.Str();
  h.ttl_ms = r.I64();
  h.renew = r.U8();
  const bool fenced = r.U8();
  const int64_t fence = r.I64();
  if (fenced) h.fence = fence;
  const LockKind kind = EnumNamed(r.Str(), kKinds, "lock kind");
  h.shape = LockShape{kind, r.I32()};
  h.mode = EnumNamed(r.Str(), kModes, "hold mode");
  h.part = r.I32();
  h.note = r.Str();
  h.acquired = SteadyAt(r.I64());
  h.valid_until = SteadyAt(r.I64());
  if (format >= kFormatReentrant) {
    h.owner = static_cast<uint64_t>(r.I64());
    h.depth = r.I32();
    if (h.depth < 1 || h.depth > UINT16_MAX) throw std::runtime_error("bad depth");
  }
  return h;
}

// A list of items read by `item`, grown as they are read: a corrupt count fails on the bytes
// that are not there instead of allocating for them first.
template <typename T, typename F>
std::vector<T> ReadList(BinaryReader& r, F&& item) {
  const size_t n = r.Count();
  std::vector<T> out;
  out.reserve(std::min<size_t>(n, 4096));
  for (size_t i = 0; i < n; ++i) out.push_back(item());
  return out;
}

std::vector<HandedHold> ReadHolds(BinaryReader& r, int format) {
  return ReadList<HandedHold>(r, [&r, format] { return ReadHold(r, format); });
}

void WriteUpdates(BinaryWriter& w, const std::vector<HoldUpdate>& updates, int format) {
  w.List(updates, [&w, format](const HoldUpdate& u) {
    w.I64(static_cast<int64_t>(u.serial));
    w.I64(u.ttl_ms);
    w.I64(SinceEpochNs(u.valid_until));
    if (format >= kFormatReentrant) w.I32(u.depth);
  });
}

std::vector<HoldUpdate> ReadUpdates(BinaryReader& r, int format) {
  return ReadList<HoldUpdate>(r, [&r, format] {
    HoldUpdate u;
    u.serial = static_cast<uint64_t>(r.I64());
    u.ttl_ms = r.I64();
    u.valid_until = SteadyAt(r.I64());
    if (format >= kFormatReentrant) {
      u.depth = r.I32();
      if (u.depth < 1 || u.depth > UINT16_MAX) throw std::runtime_error("bad depth");
    }
    return u;
  });
}

std::vector<std::string> ReadStrings(BinaryReader& r) {
  return ReadList<std::string>(r, [&r] { return r.Str(); });
}

}  // namespace

bool IsBinary(std::string_view text) { return text.starts_with(kBinaryMagic); }

// An upper bound of the encoded size of the holds, so that the output grows once.
size_t HoldBytes(const std::vector<HandedHold>& holds) {
  size_t n = 0;
  for (const auto& h : holds) {
    n += 96 + h.resource.size() + h.token.size() + h.value.size() + h.note.size();
  }
  return n;
}

std::string EncodeBinary(const State& st) {
  std::string out(kBinaryMagic);
  size_t bytes = 4096;
  for (const auto& s : st.sessions) bytes += 256 + s.input.size() + HoldBytes(s.holds);
  for (const auto& l : st.leases) bytes += 256 + HoldBytes(l.holds);
  out.reserve(bytes);
  BinaryWriter w(out);
  const auto str = [&w](const std::string& s) { w.Str(s); };
  const int format = st.format;
  const bool precopied = format >= kFormatPreCopied;
  const auto hold = [&w, format](const HandedHold& h) { WriteHold(w, h, format); };
  w.I32(st.format);
  w.Str(st.version);
  w.Str(st.agent_id);
  w.List(st.masters, str);
  w.Str(st.key_prefix);
  w.Str(st.fence_prefix);
  w.I32(st.listener);
  w.I32(st.previous_pid);
  w.I64(st.held_since_ns);
  w.List(st.sessions, [&](const SessionState& s) {
    if (precopied) w.I64(static_cast<int64_t>(s.id));
    w.I32(s.fd);
    w.Str(s.input);
    w.List(s.holds, hold);
    if (precopied) WriteUpdates(w, s.kept, format);
    w.List(s.asks, [&](const PendingAsk& a) {
      w.Str(a.line);
      w.I64(a.age_ms);
    });
    w.List(s.observed, str);
    w.Str(s.upgrade_id);
  });
  w.List(st.leases, [&](const LeaseState& l) {
    w.I32(static_cast<int32_t>(l.uid));
    w.List(l.holds, hold);
    if (precopied) WriteUpdates(w, l.kept, format);
    w.List(l.creators, [&](const LeaseCreator& c) {
      w.Str(c.resource);
      w.Str(c.token);
      w.I32(c.creator.pid);
      w.I32(c.creator.uid);
      w.I32(c.creator.gid);
      w.Str(c.creator.cmdline);
    });
  });
  if (precopied) w.List(st.gone, [&w](uint64_t serial) { w.I64(static_cast<int64_t>(serial)); });
  return out;
}

std::variant<State, std::string> DecodeBinary(std::string_view text) {
  try {
    BinaryReader r(text.substr(kBinaryMagic.size()));
    State st;
    st.format = r.I32();
    if (st.format < kFormatBinary || st.format > kFormatReentrant) return NotRead(st.format);
    const int format = st.format;
    const bool precopied = format >= kFormatPreCopied;
    st.version = r.Str();
    st.agent_id = r.Str();
    st.masters = ReadStrings(r);
    st.key_prefix = r.Str();
    st.fence_prefix = r.Str();
    st.listener = r.I32();
    st.previous_pid = r.I32();
    st.held_since_ns = r.I64();
    st.sessions = ReadList<SessionState>(r, [&r, format, precopied] {
      SessionState s;
      if (precopied) s.id = static_cast<uint64_t>(r.I64());
      s.fd = r.I32();
      s.input = r.Str();
      s.holds = ReadHolds(r, format);
      if (precopied) s.kept = ReadUpdates(r, format);
      s.asks = ReadList<PendingAsk>(r, [&r] {
        PendingAsk a;
        a.line = r.Str();
        a.age_ms = r.I64();
        return a;
      });
      s.observed = ReadStrings(r);
      s.upgrade_id = r.Str();
      return s;
    });
    st.leases = ReadList<LeaseState>(r, [&r, format, precopied] {
      LeaseState l;
      l.uid = static_cast<uid_t>(r.I32());
      l.holds = ReadHolds(r, format);
      if (precopied) l.kept = ReadUpdates(r, format);
      l.creators = ReadList<LeaseCreator>(r, [&r] {
        LeaseCreator c;
        c.resource = r.Str();
        c.token = r.Str();
        c.creator.pid = r.I32();
        c.creator.uid = r.I32();
        c.creator.gid = r.I32();
        c.creator.cmdline = r.Str();
        return c;
      });
      return l;
    });
    if (precopied) {
      st.gone = ReadList<uint64_t>(r, [&r] { return static_cast<uint64_t>(r.I64()); });
    }
    if (!r.done()) throw std::runtime_error("bytes after the state");
    return st;
  } catch (const std::exception& e) {
    return std::string("malformed hand-over state (format 2, 3 or 4): ") + e.what();
  }
}

bool IsPreCopy(std::string_view text) { return text.starts_with(kPreCopyMagic); }

std::string EncodePreCopy(const PreCopy& slice) {
  std::string out(kPreCopyMagic);
  const int format = slice.format;
  size_t bytes = 64;
  for (const auto& [session, h] : slice.holds) {
    bytes += 104 + h.resource.size() + h.token.size() + h.value.size() + h.note.size();
  }
  out.reserve(bytes);
  BinaryWriter w(out);
  // Format 3 slices start with the list; later ones with -format (a list never counts below 0).
  if (format > kFormatPreCopied) w.I32(-format);
  w.List(slice.holds, [&w, format](const std::pair<uint64_t, HandedHold>& held) {
    w.I64(static_cast<int64_t>(held.first));
    WriteHold(w, held.second, format);
  });
  return out;
}

std::variant<PreCopy, std::string> DecodePreCopy(std::string_view text) {
  try {
    BinaryReader r(text.substr(kPreCopyMagic.size()));
    PreCopy slice;
    if (r.PeekI32() < 0) {
      slice.format = -r.I32();
      if (slice.format > kFormatReentrant) return NotRead(slice.format);
    }
    const int format = slice.format;
    slice.holds = ReadList<std::pair<uint64_t, HandedHold>>(r, [&r, format] {
      const auto session = static_cast<uint64_t>(r.I64());
      return std::make_pair(session, ReadHold(r, format));
    });
    if (!r.done()) throw std::runtime_error("bytes after the slice");
    return slice;
  } catch (const std::exception& e) {
    return std::string("malformed pre-copy slice: ") + e.what();
  }
}

}  // namespace lw::handover
