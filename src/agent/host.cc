#include "agent/host.h"

#include <grp.h>
#include <pwd.h>
#include <sys/resource.h>

#include <optional>
#include <vector>

namespace lw {
namespace {

std::optional<uid_t> LookUpUser(const std::string& name) {
  if (auto id = ParseId(name)) return static_cast<uid_t>(*id);
  std::vector<char> buffer(16 * 1024);
  passwd entry{};
  passwd* found = nullptr;
  if (getpwnam_r(name.c_str(), &entry, buffer.data(), buffer.size(), &found) != 0 ||
      found == nullptr) {
    return std::nullopt;
  }
  return found->pw_uid;
}

std::optional<gid_t> LookUpGroup(const std::string& name) {
  if (auto id = ParseId(name)) return static_cast<gid_t>(*id);
  std::vector<char> buffer(64 * 1024);  // groups with many members have long entries
  group entry{};
  group* found = nullptr;
  if (getgrnam_r(name.c_str(), &entry, buffer.data(), buffer.size(), &found) != 0 ||
      found == nullptr) {
    return std::nullopt;
  }
  return found->gr_gid;
}

}  // namespace

NameResolver SystemNameResolver() { return {LookUpUser, LookUpGroup}; }

std::variant<SocketAccess, std::string> ResolveSocketAccess(const Config& config) {
  SocketAccess access;
  access.mode = static_cast<unsigned>(std::stoul(config.socket_mode, nullptr, 8));  // validated
  if (!config.socket_owner.empty()) {
    auto uid = LookUpUser(config.socket_owner);
    if (!uid) return "socket_owner: no user named \"" + config.socket_owner + "\" on this host";
    access.owner = static_cast<int>(*uid);
  }
  if (!config.socket_group.empty()) {
    auto gid = LookUpGroup(config.socket_group);
    if (!gid) return "socket_group: no group named \"" + config.socket_group + "\" on this host";
    access.group = static_cast<int>(*gid);
  }
  return access;
}

std::string RaiseFileLimit(size_t wanted) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return "";
  if (limit.rlim_cur < wanted && limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max == RLIM_INFINITY ? wanted
                                                      : std::min<rlim_t>(wanted, limit.rlim_max);
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  if (limit.rlim_cur >= wanted) return "";
  return "the open-file limit is " + std::to_string(limit.rlim_cur) + " but max_connections "
         "and the masters need about " + std::to_string(wanted) + "; connections beyond it are "
         "refused by the kernel (raise LimitNOFILE / ulimit -n)";
}

}  // namespace lw
