#pragma once
// How the admin server answers: JSON bodies, errors built from a Failure with the HTTP status
// of its code, and the words the audit and debug lines use for a request.

#include <httplib.h>

#include <nlohmann/json.hpp>
#include <string>

#include "core/result.h"

namespace lw {

// The HTTP status of an admin API error: the one place that maps codes to statuses
// (docs/api.md lists them).
int HttpStatusOf(ErrorCode code);

// `status` and the JSON body, with nosniff.
void SendJson(httplib::Response& res, int status, const nlohmann::ordered_json& body);
// The error body of `failure` ({"ok":false,"error":...,"message":...}) with HttpStatusOf its
// code; an `unauthorized` one carries the Bearer challenge (WWW-Authenticate).
void SendFailure(httplib::Response& res, const Failure& failure);
// The same with a status the HTTP layer chose already (413, 411, a malformed request).
void SendFailure(httplib::Response& res, int status, const Failure& failure);

// JSON-quoted, so a key or header cannot forge log lines.
std::string Quote(const std::string& text);
// "who" for audit and debug lines: the peer address and its user agent.
std::string Who(const httplib::Request& req);

}  // namespace lw
