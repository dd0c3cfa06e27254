#include "fleet/master_links.h"

#include <spdlog/spdlog.h>

namespace lw::fleet {

MasterLinks::MasterLinks(std::vector<MasterAddress> masters,
                         std::chrono::milliseconds connect_timeout,
                         std::chrono::milliseconds command_timeout, std::string activity)
    : masters_(std::move(masters)),
      connect_timeout_(connect_timeout),
      command_timeout_(command_timeout),
      activity_(std::move(activity)),
      links_(masters_.size()) {}

std::variant<std::vector<Reply>, std::string> MasterLinks::Pipeline(
    size_t i, const std::vector<Command>& commands) {
  Link& link = links_[i];
  if (!link.conn) {
    auto opened = BlockingConnection::Open(masters_[i], connect_timeout_, command_timeout_);
    if (auto* error = std::get_if<std::string>(&opened)) {
      Failed(i, *error);
      return *error;
    }
    link.conn = std::move(std::get<std::unique_ptr<BlockingConnection>>(opened));
  }
  auto replies = link.conn->Pipeline(commands);
  if (auto* error = std::get_if<std::string>(&replies)) {
    link.conn.reset();
    const std::string text = masters_[i].Display() + ": " + *error;
    Failed(i, text);
    return text;
  }
  return replies;
}

void MasterLinks::Failed(size_t i, const std::string& error) {
  if (links_[i].failing) return;
  links_[i].failing = true;
  if (error.find("NOPERM") != std::string::npos) {
    spdlog::warn("{} on {} refused: {} (the ACL must allow the lockwarden:* keys and channels: "
                 "docs/security.md); retrying quietly until it works",
                 activity_, masters_[i].Display(), error);
  } else {
    spdlog::warn("{} on {} failed: {}; retrying quietly until it works", activity_,
                 masters_[i].Display(), error);
  }
}

void MasterLinks::Worked(size_t i) {
  if (!links_[i].failing) return;
  links_[i].failing = false;
  spdlog::info("{} on {} works again", activity_, masters_[i].Display());
}

std::string FirstError(const std::vector<Reply>& replies) {
  for (const Reply& r : replies) {
    if (r.kind == Reply::Kind::kError) return r.text.empty() ? "error reply" : r.text;
  }
  return "";
}

}  // namespace lw::fleet
