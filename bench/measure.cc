#include "measure.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace lw::bench {

Flags::Flags(int argc, char** argv, const std::vector<std::string>& known,
             const std::vector<std::string>& switches) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (!a.starts_with("--")) throw std::invalid_argument("unexpected argument " + a);
    a = a.substr(2);
    const bool is_switch = std::find(switches.begin(), switches.end(), a) != switches.end();
    if (!is_switch && std::find(known.begin(), known.end(), a) == known.end()) {
      throw std::invalid_argument("unknown flag --" + a);
    }
    if (is_switch) {
      values_[a] = "1";
    } else {
      if (i + 1 >= argc) throw std::invalid_argument("--" + a + " needs a value");
      values_[a] = argv[++i];
    }
  }
}

std::string Flags::Str(const std::string& name, const std::string& fallback) const {
  const auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

int64_t Flags::Int(const std::string& name, int64_t fallback) const {
  const auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  char* end = nullptr;
  const long long v = std::strtoll(it->second.c_str(), &end, 10);
  if (end == it->second.c_str() || *end != '\0') {
    throw std::invalid_argument("--" + name + " wants an integer, not " + it->second);
  }
  return v;
}

double Flags::Real(const std::string& name, double fallback) const {
  const auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  char* end = nullptr;
  const double v = std::strtod(it->second.c_str(), &end);
  if (end == it->second.c_str() || *end != '\0') {
    throw std::invalid_argument("--" + name + " wants a number, not " + it->second);
  }
  return v;
}

std::vector<std::string> Flags::List(const std::string& name) const {
  std::vector<std::string> out;
  std::stringstream in(Str(name, ""));
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

double Samples::Percentile(double p) {
  if (v_.empty()) return 0;
  if (!sorted_) {
    std::sort(v_.begin(), v_.end());
    sorted_ = true;
  }
  // Nearest rank: the smallest sample with at least p of all samples at or below it.
  const double rank = p * static_cast<double>(v_.size());
  size_t i = rank <= 1 ? 0 : static_cast<size_t>(rank + 0.999999) - 1;
  i = std::min(i, v_.size() - 1);
  return v_[i];
}

double CpuSeconds(const std::vector<int>& pids) {
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  double total = 0;
  for (const int pid : pids) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(f, line)) continue;
    // The command name (field 2) may hold spaces; fields are counted after its ')'.
    const auto close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    std::string field;
    long long utime = 0, stime = 0;
    for (int n = 3; rest >> field; ++n) {
      if (n == 14) utime = std::atoll(field.c_str());
      if (n == 15) {
        stime = std::atoll(field.c_str());
        break;
      }
    }
    total += static_cast<double>(utime + stime) / tick;
  }
  return total;
}

int64_t StatusKib(int pid, const char* field) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  const std::string want = std::string(field) + ":";
  while (std::getline(f, line)) {
    if (line.starts_with(want)) return std::atoll(line.c_str() + want.size());
  }
  return -1;
}

std::vector<int> Pids(const std::vector<std::string>& list) {
  std::vector<int> out;
  for (const auto& s : list) out.push_back(std::atoi(s.c_str()));
  return out;
}

void Result::Text(const std::string& key, const std::string& value) {
  fields_.push_back({key, value, true});
}

void Result::Number(const std::string& key, double value, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
  fields_.push_back({key, buf, false});
}

void Result::Percentiles(const std::string& prefix, Samples& s) {
  Number(prefix + "_p50", s.Percentile(0.50));
  Number(prefix + "_p90", s.Percentile(0.90));
  Number(prefix + "_p99", s.Percentile(0.99));
  Number(prefix + "_max", s.Percentile(1.0));
}

bool Result::Emit(const std::string& json_path) const {
  std::string line, json = "{";
  for (const auto& f : fields_) {
    if (!line.empty()) line += ' ';
    line += f.key + '=' + f.text;
    if (json.size() > 1) json += ',';
    json += '"' + f.key + "\":";
    json += f.quoted ? '"' + f.text + '"' : f.text;  // our texts never need escaping
  }
  json += "}\n";
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
  if (json_path.empty()) return true;
  FILE* out = std::fopen(json_path.c_str(), "a");
  if (out == nullptr) return false;
  const bool ok = std::fputs(json.c_str(), out) >= 0;
  return std::fclose(out) == 0 && ok;
}

}  // namespace lw::bench
