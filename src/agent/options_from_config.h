#pragma once
// The one place a setting (config/settings.def) becomes a room's option: one function per
// option struct the agent builds. Each fills every field a setting decides and leaves the
// wiring (stats, event sinks, watches, peers, resolved host names) at its default for the
// caller to set; the rooms themselves never see Config.

#include "admin/admin_context.h"
#include "agent/elections.h"
#include "agent/lock_service.h"
#include "agent/server.h"
#include "config/config.h"
#include "fleet/presence.h"
#include "fleet/reader.h"
#include "fleet/records.h"
#include "locking/lock_engine.h"
#include "redis/node_client.h"
#include "redis/subscriber.h"
#include "scan/leak_scanner.h"

namespace lw {

// Left unset: stats, events.
NodeClientOptions NodeClientOptionsFrom(const Config& cfg);
// The release subscribers' connections (the log texts keep their defaults).
SubscriberOptions SubscriberOptionsFrom(const Config& cfg);
// Left unset: events, stats, release_watch, value_prefix (the fleet member's agent id).
EngineOptions EngineOptionsFrom(const Config& cfg);
// Left unset: watch, stats, agent_id, host.
ElectionOptions ElectionOptionsFrom(const Config& cfg);
// access: the `access` rules as resolved against the host's user and group databases.
// Left unset: elections.
ServiceOptions ServiceOptionsFrom(const Config& cfg, AccessPolicy access);
// socket: socket_mode, socket_owner and socket_group as resolved against the host's databases.
ServerOptions ServerOptionsFrom(const Config& cfg, const SocketAccess& socket);
// The admin server's bounds and what its handlers need to know of the setup; every pointer,
// callback, the token and the agent's record are left unset.
AdminContext AdminContextFrom(const Config& cfg);
// The leak scanner's (serve and `lockwarden scan`).
ScanSettings ScanSettingsFrom(const Config& cfg);

namespace fleet {
// The settings every agent of a fleet must share, as the registry announces them.
SafetySettings SafetySettingsFrom(const Config& cfg);
ReaderSettings ReaderSettingsFrom(const Config& cfg);
// Left unset: record.
PresenceSettings PresenceSettingsFrom(const Config& cfg);
}  // namespace fleet

}  // namespace lw
