#pragma once
// Test fixture: a real Prometheus server (/usr/bin/prometheus, found in PATH) as a child process,
// scraping the given targets every second and evaluating a copy of a rules file whose `for:`
// durations are all shortened, so alert rules can be exercised end to end in seconds. Its temp
// dir holds prometheus.yml, rules.yml, data/ and prometheus.log. Not thread-safe.

#include <sys/types.h>

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace lw::test {

class PrometheusProcess {
 public:
  using Ms = std::chrono::milliseconds;

  // Writes a config with job_name "lockwarden" (scrape_interval 1s, scrape_timeout 1s,
  // evaluation_interval 1s, global.external_labels `external_labels`) scraping `targets`
  // ("host:port", path /metrics) and a copy of
  // `rules_file` in which every line matching `^\s*for:\s*\S+` gets the duration
  // `for_override`; starts prometheus on a free 127.0.0.1 port and waits (up to 20 s) until
  // GET /-/ready answers 200. Retries on a fresh port if the process exits early (port taken).
  // Throws std::runtime_error with the log tail on failure (process killed, dir removed).
  PrometheusProcess(const std::vector<std::string>& targets, const std::string& rules_file,
                    const std::string& for_override = "2s",
                    const std::map<std::string, std::string>& external_labels = {});
  // SIGTERM, up to 5 s for a clean exit, then SIGKILL; reaps the process and removes the dir.
  ~PrometheusProcess();
  PrometheusProcess(const PrometheusProcess&) = delete;
  PrometheusProcess& operator=(const PrometheusProcess&) = delete;

  int port() const { return port_; }
  const std::string& dir() const { return dir_; }
  // The last max_bytes of prometheus.log, for failure messages.
  std::string LogTail(size_t max_bytes = 4096) const;

  // Names of the alerts currently in `state` ("firing" or "pending") per GET /api/v1/alerts,
  // one entry per alert instance (a name repeats when several label sets are active). Throws
  // std::runtime_error when the API does not answer with status "success".
  std::vector<std::string> AlertsInState(const std::string& state) const;
  std::vector<std::string> FiringAlerts() const { return AlertsInState("firing"); }
  std::vector<std::string> PendingAlerts() const { return AlertsInState("pending"); }
  // Polls FiringAlerts() until `name` is among them (true) or `deadline` from now passes.
  bool WaitFiring(const std::string& name, Ms deadline) const;

  // Instant query (GET /api/v1/query): the `data.result` of the answer (for a vector, an array
  // of {"metric":{...},"value":[t,"v"]}). Throws std::runtime_error on any failure.
  nlohmann::json Query(const std::string& promql) const;
  // The value of the first sample of Query(promql), or nullopt when the result is empty.
  std::optional<double> QueryValue(const std::string& promql) const;
  // Polls GET /api/v1/targets until there is at least one active target and all are "up".
  bool WaitTargetsUp(Ms deadline) const;

  // GET path (e.g. "/api/v1/rules"); the parsed body when it is {"status":"success",...};
  // throws std::runtime_error otherwise.
  nlohmann::json ApiGet(const std::string& path) const;

 private:
  // Starts the process on a fresh port; false (child reaped) if it exited before being ready.
  bool TryStart(std::string* why);
  void Shutdown() noexcept;

  std::string dir_;
  std::string log_path_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace lw::test
