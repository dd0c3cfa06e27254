#include "core/client_session.h"

#include <algorithm>

namespace lw {

void SessionLocks::Forget(const std::string& name) {
  auto w = waiting.find(name);
  if (w != waiting.end() && --w->second <= 0) waiting.erase(w);
}

void SessionLocks::Dropped(const std::string& name) {
  auto pos = std::find(held.begin(), held.end(), name);
  if (pos != held.end()) {
    *pos = std::move(held.back());
    held.pop_back();
  }
}

size_t SessionLocks::commitments() const {
  size_t n = held.size();
  for (const auto& [name, count] : waiting) n += static_cast<size_t>(count);
  return n;
}

ClientSession& SessionTable::Open(SessionId id) {
  ClientSession& s = sessions_[id];
  s.id = id;
  return s;
}

ClientSession* SessionTable::Find(SessionId id) {
  auto it = sessions_.find(id);
  return it == sessions_.end() ? nullptr : &it->second;
}

const ClientSession* SessionTable::Find(SessionId id) const {
  auto it = sessions_.find(id);
  return it == sessions_.end() ? nullptr : &it->second;
}

}  // namespace lw
