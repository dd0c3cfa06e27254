#pragma once
// What the load generators of bench/ share: flags, latency samples, process CPU and RSS read
// from /proc, and the result line (readable, plus one JSON object for bench/run.sh).
// Everything here runs on the bench's single thread.

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace lw::bench {

using Clock = std::chrono::steady_clock;

inline double Micros(Clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

// "--name value" pairs (and bare "--flag" switches). Unknown names are an error so a typo
// never silently measures something else.
class Flags {
 public:
  // known: every accepted name without "--"; switches: those taking no value.
  Flags(int argc, char** argv, const std::vector<std::string>& known,
        const std::vector<std::string>& switches);
  bool Has(const std::string& name) const { return values_.count(name) != 0; }
  std::string Str(const std::string& name, const std::string& fallback) const;
  int64_t Int(const std::string& name, int64_t fallback) const;
  double Real(const std::string& name, double fallback) const;
  // A comma-separated list ("a,b,c"); empty when absent.
  std::vector<std::string> List(const std::string& name) const;

 private:
  std::map<std::string, std::string> values_;
};

// Latency samples in microseconds. Percentiles are read from the recorded samples (nearest
// rank), never interpolated or averaged.
class Samples {
 public:
  void Add(double us) { v_.push_back(static_cast<float>(us)); }
  size_t size() const { return v_.size(); }
  // p in [0, 1]; 1 = max. 0 when there are no samples.
  double Percentile(double p);

 private:
  std::vector<float> v_;
  bool sorted_ = false;
};

// CPU seconds (utime + stime) of the processes, summed; 0 for pids that cannot be read.
double CpuSeconds(const std::vector<int>& pids);

// CPU seconds used by each group of processes over a window: Begin(), later End(), then
// seconds(i) for group i (in the order given).
class CpuWindow {
 public:
  explicit CpuWindow(std::vector<std::vector<int>> groups)
      : groups_(std::move(groups)), seconds_(groups_.size(), 0.0) {}
  void Begin() {
    for (size_t i = 0; i < groups_.size(); ++i) seconds_[i] = CpuSeconds(groups_[i]);
  }
  void End() {
    for (size_t i = 0; i < groups_.size(); ++i) seconds_[i] = CpuSeconds(groups_[i]) - seconds_[i];
  }
  double seconds(size_t i) const { return seconds_[i]; }

 private:
  std::vector<std::vector<int>> groups_;
  std::vector<double> seconds_;
};
// A field of /proc/PID/status in KiB (e.g. "VmRSS", "VmHWM"); -1 when unreadable.
int64_t StatusKib(int pid, const char* field);
// Parses "1,2,3" pid lists (empty entries skipped).
std::vector<int> Pids(const std::vector<std::string>& list);

// One result: ordered key/value fields printed as `key=value` on one line and, when a JSON
// path is given, appended to that file as one JSON object per line.
class Result {
 public:
  void Text(const std::string& key, const std::string& value);
  void Number(const std::string& key, double value, int decimals = 0);
  // "<prefix>_p50" ... "<prefix>_max" (µs) from the samples.
  void Percentiles(const std::string& prefix, Samples& s);
  // Prints the line to stdout and appends the JSON object to json_path (if not empty).
  // Returns false when the JSON file cannot be written.
  bool Emit(const std::string& json_path) const;

 private:
  struct Field {
    std::string key;
    std::string text;
    bool quoted;
  };
  std::vector<Field> fields_;
};

}  // namespace lw::bench
