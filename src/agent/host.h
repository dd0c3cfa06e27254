#pragma once
// What the agent asks of its host at startup: user and group names (NSS), the socket's
// ownership, and the open-file limit. Called once, before the loop runs.

#include <string>
#include <variant>

#include "agent/server.h"
#include "config/config.h"
#include "core/access.h"

namespace lw {

// Looks names up with getpwnam_r / getgrnam_r; a number is taken as an id.
NameResolver SystemNameResolver();

// socket_mode, socket_owner and socket_group resolved; a human error naming the setting.
std::variant<SocketAccess, std::string> ResolveSocketAccess(const Config& config);

// Raises the soft open-file limit towards the hard one so that `wanted` descriptors fit.
// Returns a warning for the log when they do not (empty when they do).
std::string RaiseFileLimit(size_t wanted);

}  // namespace lw
