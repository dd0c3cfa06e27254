// `lockwarden scan`: one leak-scanner pass over the configured masters, for cron and people.
// Exit 0: clean. 1: keys without a TTL were found. 69: a master could not be scanned.

#include <csignal>
#include <cstdio>
#include <thread>
#include <variant>

#include "admin/views.h"
#include "agent/options_from_config.h"
#include "cli/commands.h"
#include "scan/leak_scanner.h"

namespace lw::cli {

int RunScan(const ConfigSources& sources, bool json) {
  auto loaded = LoadConfig(sources);
  if (auto* err = std::get_if<std::string>(&loaded)) {
    std::fprintf(stderr, "lockwarden: configuration error: %s\n", err->c_str());
    return kExitUsage;
  }
  const Config& cfg = std::get<Config>(loaded);
  // A master that closes the connection is an error to report, not a signal to die of (a
  // write to it, plain or TLS, would raise SIGPIPE).
  signal(SIGPIPE, SIG_IGN);
  ScanHooks hooks;
  hooks.pause = [](std::chrono::microseconds d) { std::this_thread::sleep_for(d); };
  // No agent state here: a grant short of a quorum may be a live lock of a failed-over
  // agent, so partial copies are listed but never make the exit code non-zero.
  const ScanReport report = RunScanPass(ScanSettingsFrom(cfg), hooks);

  int no_ttl = 0;
  for (const Finding& f : report.findings) no_ttl += f.kind == FindingKind::kNoTtl ? 1 : 0;
  bool all_ok = true;
  for (const MasterPass& m : report.masters) all_ok = all_ok && m.ok;
  const int rc = no_ttl > 0 ? 1 : all_ok ? 0 : kExitUnavailable;

  if (json) {
    std::fputs(Dump(LeaksView(&report, 0)).c_str(), stdout);
    return rc;
  }
  for (const MasterPass& m : report.masters) {
    if (m.ok) {
      std::printf("%-22s scanned %llu key(s) in %.2f s\n", m.master.c_str(),
                  static_cast<unsigned long long>(m.keys_scanned), m.seconds);
    } else {
      std::printf("%-22s FAILED: %s\n", m.master.c_str(), m.error.c_str());
    }
  }
  if (!report.partial_note.empty()) std::printf("partial check: %s\n", report.partial_note.c_str());
  if (report.findings.empty()) {
    std::printf("no leaked keys\n");
    return rc;
  }
  std::printf("\n%-22s %-14s %-8s %10s  %s\n", "MASTER", "FINDING", "TYPE", "TTL_MS", "KEY");
  for (const Finding& f : report.findings) {
    std::printf("%-22s %-14s %-8s %10lld  %s\n", report.masters[f.master].master.c_str(),
                std::string(FindingName(f.kind)).c_str(), f.redis_type.c_str(),
                static_cast<long long>(f.ttl_ms), f.key.c_str());
  }
  return rc;
}

}  // namespace lw::cli
