#include "redis/reply.h"

#include <hiredis/hiredis.h>

namespace lw {

Reply ReadReply(const redisReply* r) {
  Reply out;
  if (r == nullptr) {
    out.kind = Reply::Kind::kDisconnected;
    return out;
  }
  switch (r->type) {
    case REDIS_REPLY_STATUS:
      out.kind = Reply::Kind::kStatus;
      break;
    case REDIS_REPLY_STRING:
      out.kind = Reply::Kind::kString;
      break;
    case REDIS_REPLY_INTEGER:
      out.kind = Reply::Kind::kInteger;
      out.integer = r->integer;
      break;
    case REDIS_REPLY_NIL:
      out.kind = Reply::Kind::kNil;
      break;
    case REDIS_REPLY_ARRAY:
      out.kind = Reply::Kind::kArray;
      out.elements.reserve(r->elements);
      for (size_t i = 0; i < r->elements; ++i) out.elements.push_back(ReadReply(r->element[i]));
      break;
    default:  // REDIS_REPLY_ERROR
      out.kind = Reply::Kind::kError;
      break;
  }
  if (r->str != nullptr) out.text.assign(r->str, r->len);
  return out;
}

}  // namespace lw
