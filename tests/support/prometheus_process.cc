#include "support/prometheus_process.h"

#include <sys/wait.h>

#include <cctype>
#include <cerrno>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <sstream>
#include <stdexcept>

#include "support/files.h"
#include "support/http.h"
#include "support/polling.h"
#include "support/redis_cluster.h"

namespace lw::test {
namespace {

using Ms = PrometheusProcess::Ms;

constexpr Ms kPrometheusReadyDeadline{20'000};
constexpr Ms kPrometheusTermGrace{5'000};
constexpr Ms kPollPause{100};  // Prometheus works in 1 s ticks: no point polling faster
constexpr int kPrometheusStartAttempts = 3;

// True (child reaped) once `pid` has exited.
bool Reaped(pid_t pid) {
  int status = 0;
  pid_t r;
  do {
    r = waitpid(pid, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  return r == pid || (r < 0 && errno == ECHILD);
}

// The rules with every `for:` duration replaced, line by line (comments and the rest untouched).
std::string ShortenFor(const std::string& rules, const std::string& duration) {
  static const std::regex kFor(R"(^(\s*for:\s*)\S+)");
  std::istringstream in(rules);
  std::string out, line;
  std::smatch m;
  while (std::getline(in, line)) {
    // Spliced by hand: "$1" + "2s" would read as the group reference $12.
    if (std::regex_search(line, m, kFor)) line = m.str(1) + duration + m.suffix().str();
    out += line + "\n";
  }
  return out;
}

std::string UrlEncode(const std::string& s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace

PrometheusProcess::PrometheusProcess(const std::vector<std::string>& targets,
                                     const std::string& rules_file, const std::string& for_override,
                                     const std::map<std::string, std::string>& external_labels) {
  dir_ = MakeTempDir("lw-prometheus-");
  log_path_ = dir_ + "/prometheus.log";
  try {
    WriteFile(dir_ + "/rules.yml", ShortenFor(ReadFileOrThrow(rules_file), for_override), 0644);
    std::string config =
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n";
    if (!external_labels.empty()) config += "  external_labels:\n";
    for (const auto& [name, value] : external_labels)
      config += "    " + name + ": '" + value + "'\n";
    config += "rule_files:\n  - " + dir_ + "/rules.yml\n";
    config += "scrape_configs:\n  - job_name: lockwarden\n    static_configs:\n";
    config += "      - targets:\n";
    for (const auto& t : targets) config += "          - '" + t + "'\n";
    WriteFile(dir_ + "/prometheus.yml", config, 0644);
    std::string why;
    for (int attempt = 1; !TryStart(&why); ++attempt) {
      if (attempt == kPrometheusStartAttempts) throw std::runtime_error(why);
    }
  } catch (...) {
    Shutdown();
    throw;
  }
}

bool PrometheusProcess::TryStart(std::string* why) {
  port_ = PickFreePort();
  pid_ = SpawnTestProcess({"prometheus", "--config.file=" + dir_ + "/prometheus.yml",
                           "--storage.tsdb.path=" + dir_ + "/data",
                           "--web.listen-address=127.0.0.1:" + std::to_string(port_),
                           "--storage.tsdb.retention.time=1h", "--log.level=warn"},
                          log_path_);
  bool exited = false;
  const bool ready = Eventually(
      [&] {
        exited = Reaped(pid_);
        return exited || HttpGet(port_, "/-/ready").status == 200;
      },
      kPrometheusReadyDeadline, kPollPause);
  if (ready && !exited) return true;
  *why = "prometheus on port " + std::to_string(port_) +
         (exited ? " exited early" : " not ready within 20 s") + "\n--- prometheus.log ---\n" +
         LogTail();
  if (!exited) throw std::runtime_error(*why);  // Shutdown (by the caller) kills it
  pid_ = -1;
  return false;
}

PrometheusProcess::~PrometheusProcess() { Shutdown(); }

void PrometheusProcess::Shutdown() noexcept {
  if (pid_ > 0) {
    kill(pid_, SIGTERM);
    if (!Eventually([&] { return Reaped(pid_); }, kPrometheusTermGrace, kPollPause)) {
      kill(pid_, SIGKILL);
      Eventually([&] { return Reaped(pid_); }, kPrometheusTermGrace, kPollPause);
    }
    pid_ = -1;
  }
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

std::string PrometheusProcess::LogTail(size_t max_bytes) const {
  return FileTail(log_path_, max_bytes);
}

nlohmann::json PrometheusProcess::ApiGet(const std::string& path) const {
  const HttpResult r = HttpGet(port_, path);
  if (r.status != 200) {
    throw std::runtime_error("GET " + path + ": status " + std::to_string(r.status) + " " +
                             r.error + " " + r.body);
  }
  nlohmann::json body = nlohmann::json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  if (!body.is_object() || body.value("status", "") != "success") {
    throw std::runtime_error("GET " + path + ": unexpected answer " + r.body);
  }
  return body;
}

std::vector<std::string> PrometheusProcess::AlertsInState(const std::string& state) const {
  std::vector<std::string> names;
  const nlohmann::json body = ApiGet("/api/v1/alerts");
  for (const auto& alert : body["data"]["alerts"]) {
    if (alert.value("state", "") == state) names.push_back(alert["labels"].value("alertname", ""));
  }
  return names;
}

bool PrometheusProcess::WaitFiring(const std::string& name, Ms deadline) const {
  return Eventually(
      [&] {
        for (const auto& n : FiringAlerts()) {
          if (n == name) return true;
        }
        return false;
      },
      deadline, kPollPause);
}

nlohmann::json PrometheusProcess::Query(const std::string& promql) const {
  return ApiGet("/api/v1/query?query=" + UrlEncode(promql))["data"]["result"];
}

std::optional<double> PrometheusProcess::QueryValue(const std::string& promql) const {
  const nlohmann::json result = Query(promql);
  if (!result.is_array() || result.empty()) return std::nullopt;
  // A scalar or string result is [t, "v"] itself; a vector is [{"metric":..,"value":[t,"v"]}].
  const nlohmann::json& value = result[0].is_object() ? result[0]["value"] : result;
  return std::stod(value[1].get<std::string>());
}

bool PrometheusProcess::WaitTargetsUp(Ms deadline) const {
  return Eventually(
      [&] {
        const nlohmann::json body = ApiGet("/api/v1/targets");
        const auto& active = body["data"]["activeTargets"];
        if (!active.is_array() || active.empty()) return false;
        for (const auto& t : active) {
          if (t.value("health", "") != "up") return false;
        }
        return true;
      },
      deadline, kPollPause);
}

}  // namespace lw::test
