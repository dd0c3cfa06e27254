#pragma once
// What the leak scanner reports to metrics, from the scanner thread.

#include <cstddef>
#include <cstdint>

namespace lw {

// Findings of one pass over one master, by kind.
struct FindingCounts {
  int64_t no_ttl = 0;
  int64_t ttl_above_max = 0;
  int64_t partial = 0;
};

class ScanObserver {
 public:
  virtual ~ScanObserver() = default;
  virtual void KeysScanned(size_t /*master*/, uint64_t /*keys*/) {}
  // A pass over `master` completed at unix time `finished_unix_s` after `seconds`.
  virtual void PassDone(size_t /*master*/, double /*seconds*/, double /*finished_unix_s*/,
                        const FindingCounts& /*counts*/) {}
  virtual void PassFailed(size_t /*master*/) {}
};

}  // namespace lw
