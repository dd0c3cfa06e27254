// Quick acquire/release latency against a running agent (see bench/README.md).
//
//   lw_bench_latency SOCKET [CLIENTS] [CYCLES_PER_CLIENT] [contended]
//
// Each client is its own connection and thread and runs acquire+release cycles on its own
// resource (or all on one resource with "contended"). Prints cycles/s and the acquire
// latency distribution as seen by the client (socket hop included).

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"

namespace {

using Clock = std::chrono::steady_clock;

double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<long>(i), v.end());
  return v[i];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s SOCKET [CLIENTS] [CYCLES_PER_CLIENT] [contended]\n", argv[0]);
    return 64;
  }
  const std::string socket = argv[1];
  const int clients = argc > 2 ? std::atoi(argv[2]) : 1;
  const int cycles = argc > 3 ? std::atoi(argv[3]) : 2000;
  const bool contended = argc > 4 && std::string(argv[4]) == "contended";

  std::vector<std::vector<double>> lat(static_cast<size_t>(clients));
  std::vector<int> failures(static_cast<size_t>(clients), 0);
  std::vector<std::thread> threads;
  const auto t0 = Clock::now();
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      lw::client::Client client(socket);
      const std::string res = contended ? "bench:one" : "bench:" + std::to_string(c);
      auto& mine = lat[static_cast<size_t>(c)];
      mine.reserve(static_cast<size_t>(cycles));
      for (int i = 0; i < cycles; ++i) {
        const auto a = Clock::now();
        const auto r = client.Acquire(res, 10'000, 10'000);
        mine.push_back(std::chrono::duration<double, std::micro>(Clock::now() - a).count());
        if (!r.value("ok", false)) {
          ++failures[static_cast<size_t>(c)];
          continue;
        }
        client.Release(res, r["token"]);
      }
    });
  }
  for (auto& t : threads) t.join();
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  std::vector<double> all;
  int failed = 0;
  for (int c = 0; c < clients; ++c) {
    all.insert(all.end(), lat[static_cast<size_t>(c)].begin(), lat[static_cast<size_t>(c)].end());
    failed += failures[static_cast<size_t>(c)];
  }
  const double total = static_cast<double>(clients) * cycles;
  std::printf("mode=%s clients=%d cycles=%.0f failed=%d  %.0f cycles/s  acquire us: p50=%.0f "
              "p90=%.0f p99=%.0f max=%.0f\n",
              contended ? "contended" : "uncontended", clients, total, failed, total / secs,
              Percentile(all, 0.50), Percentile(all, 0.90), Percentile(all, 0.99),
              Percentile(all, 1.0));
  return failed == 0 ? 0 : 1;
}
