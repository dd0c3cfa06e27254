// One fleet table read against masters that already hold the lock keys (bench/fleet/run.sh
// fills them): builds a FleetReader (src/fleet/reader.h) over the given masters, asks for one
// view and prints, as one JSON line, how long the read took, what it found and the process's
// memory before and after (VmRSS, VmHWM from /proc/self/status). The Redis side (CPU per
// master) is measured by run.sh around this process. A figure, never an assertion.
//
//   lw_bench_fleet_read --masters 127.0.0.1:7301,127.0.0.1:7302,... [--key-prefix lock:]
//                       [--keys-per-second 200000] [--batch 1000]

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "fleet/fleet_stats.h"
#include "fleet/reader.h"

namespace {

long StatusKb(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::strtol(line.c_str() + field.size() + 1, nullptr, 10);
  }
  return -1;
}

std::vector<lw::MasterAddress> ParseMasters(const std::string& list) {
  std::vector<lw::MasterAddress> out;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    const size_t colon = item.rfind(':');
    lw::MasterAddress m;
    m.host = item.substr(0, colon);
    m.port = std::atoi(item.c_str() + colon + 1);
    out.push_back(m);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  lw::fleet::ReaderSettings settings;
  settings.refresh = std::chrono::milliseconds(0);
  settings.command_timeout = std::chrono::milliseconds(10'000);
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--masters") settings.masters = ParseMasters(value);
    else if (flag == "--key-prefix") settings.key_prefix = value;
    else if (flag == "--keys-per-second") settings.keys_per_second = std::atoll(value.c_str());
    else if (flag == "--batch") settings.batch = std::atoll(value.c_str());
    else if (flag == "--read-budget") settings.read_budget = std::atoll(value.c_str());
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 64;
    }
  }
  if (settings.masters.empty()) {
    std::fprintf(stderr, "usage: %s --masters host:port,... [--key-prefix P]\n", argv[0]);
    return 64;
  }
  lw::stats::Registry registry;
  lw::fleet::FleetStats stats(registry);
  const long rss_before = StatusKb("VmRSS");
  lw::fleet::FleetReader reader(settings, &stats);
  reader.Start();
  const auto start = std::chrono::steady_clock::now();
  // A sweep of more keys than the read budget publishes partial views first: the figures are
  // of the first whole one.
  auto view = reader.View(0, std::chrono::minutes(10));
  const double first_view =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  while (view && view->partial) view = reader.View(view->read_unix_ms, std::chrono::minutes(10));
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!view || view->partial) {
    std::fprintf(stderr, "no whole view within 10 minutes of a read\n");
    return 69;
  }
  const long rss_with_view = StatusKb("VmRSS");
  std::printf(
      "{\"keys\":%llu,\"locks\":%llu,\"rows_kept\":%zu,\"agents\":%zu,\"masters_read\":%d,"
      "\"complete\":%s,"
      "\"reads\":%d,\"keys_walked\":%llu,\"read_seconds\":%.3f,\"first_view_seconds\":%.3f,"
      "\"wall_seconds\":%.3f,\"rss_before_kib\":%ld,"
      "\"rss_with_view_kib\":%ld,\"hwm_kib\":%ld}\n",
      static_cast<unsigned long long>(view->keys),
      static_cast<unsigned long long>(view->locks_total), view->locks.size(), view->agents.size(),
      view->masters_read, view->complete ? "true" : "false", view->reads,
      static_cast<unsigned long long>(view->keys_walked), view->read_seconds, first_view, wall,
      rss_before, rss_with_view, StatusKb("VmHWM"));
  reader.Stop();
  return 0;
}
