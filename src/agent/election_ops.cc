// The election ops of LockService's op table (docs/protocol.md "Elections").

#include "agent/lock_service.h"

namespace lw {

namespace {
Failure NotYet() { return Failure{ErrorCode::kBadRequest, "elections are not served yet"}; }
}  // namespace

template <>
void LockService::Handle(SessionId sid, const Id& id, const protocol::CampaignRequest&) {
  Fail(sid, id, "campaign", NotYet());
}
template <>
void LockService::Handle(SessionId sid, const Id& id, const protocol::ResignRequest&) {
  Fail(sid, id, "resign", NotYet());
}
template <>
void LockService::Handle(SessionId sid, const Id& id, const protocol::LeaderRequest&) {
  Fail(sid, id, "leader", NotYet());
}
template <>
void LockService::Handle(SessionId sid, const Id& id, const protocol::ObserveRequest&) {
  Fail(sid, id, "observe", NotYet());
}
template <>
void LockService::Handle(SessionId sid, const Id& id, const protocol::UnobserveRequest&) {
  Fail(sid, id, "unobserve", NotYet());
}

}  // namespace lw
