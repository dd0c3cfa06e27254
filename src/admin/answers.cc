#include "admin/answers.h"

#include "core/quote.h"

#include "admin/views.h"

namespace lw {

int HttpStatusOf(ErrorCode code) {
  switch (code) {
    case ErrorCode::kBadRequest:
      return 400;
    case ErrorCode::kUnauthorized:
      return 401;
    case ErrorCode::kForbidden:
      return 403;
    case ErrorCode::kNotFound:
    case ErrorCode::kNotHeld:
      return 404;
    case ErrorCode::kStale:
    case ErrorCode::kScannerOff:
    case ErrorCode::kKindMismatch:
    case ErrorCode::kWouldDeadlock:
      return 409;
    case ErrorCode::kInternal:
      return 500;
    case ErrorCode::kMasterError:
      return 502;
    case ErrorCode::kTooMany:
    case ErrorCode::kUnavailable:
    case ErrorCode::kStarting:
    case ErrorCode::kShuttingDown:
    case ErrorCode::kNoQuorum:
      return 503;
    case ErrorCode::kTimeout:
      return 504;
  }
  return 500;
}

void SendJson(httplib::Response& res, int status, const nlohmann::ordered_json& body) {
  res.status = status;
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_content(Dump(body), "application/json");
}

void SendFailure(httplib::Response& res, const Failure& failure) {
  SendFailure(res, HttpStatusOf(failure.code), failure);
}

void SendFailure(httplib::Response& res, int status, const Failure& failure) {
  if (failure.code == ErrorCode::kUnauthorized) {
    res.set_header("WWW-Authenticate", "Bearer realm=\"lockwarden\"");
  }
  SendJson(res, status, ErrorView(failure));
}

std::string Quote(const std::string& text) { return QuoteClientText(text); }

std::string Who(const httplib::Request& req) {
  std::string who = req.remote_addr + ":" + std::to_string(req.remote_port);
  const std::string agent = req.get_header_value("User-Agent");
  if (!agent.empty()) who += " (" + Quote(agent.substr(0, 120)) + ")";
  return who;
}

}  // namespace lw
