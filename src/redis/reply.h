#pragma once
// Reply: a master's answer as a C++ value, the one type every reader of hiredis replies uses
// (the async lock connection, the subscriber, the blocking connections of the scanner, the
// presence probe and the remedies).

#include <cstdint>
#include <string>
#include <vector>

struct redisReply;

namespace lw {

// kUnavailable and kDisconnected are ours, not Redis's: the command was not sent (no usable
// connection) or the connection died before the answer.
struct Reply {
  enum class Kind { kStatus, kString, kInteger, kNil, kArray, kError, kUnavailable, kDisconnected };
  Kind kind = Kind::kUnavailable;
  int64_t integer = 0;
  std::string text;             // status, string or error text
  std::vector<Reply> elements;  // an array's elements, in order
};

// Copies a hiredis reply (and, for an array, its elements). A null reply (hiredis's "the
// connection is gone") is kDisconnected.
Reply ReadReply(const redisReply* reply);

}  // namespace lw
