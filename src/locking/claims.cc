#include "locking/claims.h"

#include <utility>

#include "redis/scripts.h"

namespace lw {

std::string BaseKey(const HoldPlace& p) { return p.key_prefix + p.name; }

RoundRequest KindRound(RoundOp op, scripts::KindScript script, const std::string& token,
                       std::vector<std::string> keys, std::vector<std::string> args) {
  RoundRequest req;
  req.op = op;
  req.script = script;
  req.token = token;
  req.keys = std::move(keys);
  req.args = std::move(args);
  return req;
}

RoundRequest ReadRecordRound(const std::string& key_prefix, const std::string& name) {
  RoundRequest req =
      KindRound(RoundOp::kKindRead, scripts::KindScript::kReadRecord, "",
                {key_prefix + name, LeaderKey(key_prefix, name)});
  req.key = key_prefix + name;
  req.wait_all = true;
  return req;
}

}  // namespace lw
