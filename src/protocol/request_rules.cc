#include "protocol/request_rules.h"

namespace lw::protocol {

std::optional<std::string> SharedConflict(const AcquireRequest& request, bool shared_sent) {
  if (request.permits > 0 && shared_sent) {
    return std::string(
        "field \"shared\" cannot be sent with \"permits\": a semaphore has no "
        "shared holds. Send \"permits\" for a permit of a semaphore, or \"shared\": "
        "true for a read hold of a lock (without it, the hold is exclusive)");
  }
  if (request.fence && request.shared) {
    return std::string(
        "field \"fence\" has no meaning with \"shared\": true: a reader does not "
        "write, so nothing is fenced against it. Fence the exclusive (write) "
        "holds instead");
  }
  return std::nullopt;
}

std::optional<std::string> DetachConflict(const AcquireRequest& request) {
  if (!request.resources.empty() && (request.detach || request.reentrant)) {
    return std::string(
        "field \"resources\" cannot go with \"detach\" or \"reentrant\": several resources "
        "are held by this connection, each taken once");
  }
  if (request.reentrant && (request.detach || request.permits > 0 || request.shared)) {
    return std::string(
        "field \"reentrant\" is for a mutex or a write hold held by this connection: it "
        "cannot go with \"detach\" (a lease belongs to no connection), \"permits\" or "
        "\"shared\"");
  }
  if (request.detach && request.renew) {
    return std::string(
        "field \"renew\" cannot be true with \"detach\": true: a detached lease "
        "outlives this connection, so nothing renews it. It ends by its ttl_ms; "
        "keep it with \"extend\" by token, or drop \"detach\" to have it renewed "
        "while this connection lives");
  }
  return std::nullopt;
}

std::optional<std::string> ResumeConflict(const ResumeRequest& request, bool shared_sent) {
  if ((request.permits > 0) != (request.permit >= 0)) {
    return std::string(
        "fields \"permits\" and \"permit\" go together in a resume: a semaphore's permit is "
        "named by both (the acquire's permits, the grant's permit); a lock's hold by neither");
  }
  if (request.permits > 0 && shared_sent) {
    return std::string("field \"shared\" cannot be sent with \"permits\": a semaphore has no "
                       "shared holds");
  }
  if (request.fence > 0 && request.shared) {
    return std::string("field \"fence\" has no meaning with \"shared\": true: a read hold has "
                       "no fence");
  }
  if (request.depth > 1 && (request.permits > 0 || request.shared || request.election)) {
    return std::string("field \"depth\" is a reentrant hold's: a mutex's or a write hold's");
  }
  if (request.election && (request.permits > 0 || request.shared)) {
    return std::string("field \"election\" cannot go with \"permits\" or \"shared\": a "
                       "leadership is one exclusive hold of its name");
  }
  if (request.election && request.fence <= 0) {
    return std::string("a leadership's resume names its term: send \"fence\" with the "
                       "\"term\" the campaign answered");
  }
  return std::nullopt;
}

}  // namespace lw::protocol
