#pragma once
// ScanStats: the metrics the leak scanner counts, declared where they are counted (see
// stats/stats.h). The scanner thread bumps them directly; docs/metrics.md describes each family.
// Registered only when the scanner runs.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "scan/findings.h"
#include "stats/stats.h"

namespace lw {

// One master's scan metrics.
struct ScanMasterStats {
  // master: "host:port" (MasterAddress::Display()), the `master` label of every child.
  ScanMasterStats(stats::Registry& r, const std::string& master) : r_(r), m_{{"master", master}} {}

  stats::Registry& r_;
  const stats::Labels m_;
  stats::ByEnum<stats::Gauge, FindingKind, kFindingNames.size()> leaked{r_, "lockwarden_scan_leaked_keys", "Keys found by the last completed scan, by master and finding.", "finding", kFindingNames, m_};
  stats::Counter keys_scanned{r_, "lockwarden_scan_keys_scanned_total", "Keys returned by SCAN.", m_};
  stats::Gauge duration{r_, "lockwarden_scan_duration_seconds", "Duration of the last completed scan pass.", m_};
  stats::Gauge last_success{r_, "lockwarden_scan_last_success_timestamp_seconds", "Unix time the last scan pass over the master completed.", m_};
  stats::Counter errors{r_, "lockwarden_scan_errors_total", "Scan passes over the master that failed.", m_};

  // A pass over the master completed at unix time finished_unix_s after `seconds`.
  void PassDone(double seconds, double finished_unix_s, const FindingCounts& counts) {
    leaked[FindingKind::kNoTtl].Set(static_cast<double>(counts.no_ttl));
    leaked[FindingKind::kTtlAboveMax].Set(static_cast<double>(counts.ttl_above_max));
    leaked[FindingKind::kPartial].Set(static_cast<double>(counts.partial));
    duration.Set(seconds);
    last_success.Set(finished_unix_s);
  }
};

struct ScanStats {
  // masters: "host:port" of every master in configuration order (the scanner's master index).
  ScanStats(stats::Registry& r, const std::vector<std::string>& masters,
            std::chrono::milliseconds pause)
      : r_(r) {
    interval.Set(std::chrono::duration<double>(pause).count());
    for (const std::string& m : masters) {
      per_master.push_back(std::make_unique<ScanMasterStats>(r, m));
    }
  }

  stats::Registry& r_;
  stats::Gauge interval{r_, "lockwarden_scan_interval_seconds", "Configured pause between scan passes."};
  std::vector<std::unique_ptr<ScanMasterStats>> per_master;

  // Master `index`'s stats; null for an index out of range.
  ScanMasterStats* master(size_t index) {
    return index < per_master.size() ? per_master[index].get() : nullptr;
  }
};

}  // namespace lw
