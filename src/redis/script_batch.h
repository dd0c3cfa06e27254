#pragma once
// ScriptBatch: the lock-script calls queued for one master during one loop turn, written as
// one command.
//
// Under load a loop turn sends many calls to each master (64 clients: dozens of acquires and
// releases). Each EVALSHA costs the master a command and a Lua call, and costs the agent a
// command to format, a reply to parse and a callback. A batch of several calls is instead one
// EVALSHA of the batch script (BatchScriptBody), which runs each call's own script body in
// order and answers an array with one element per call, exactly what that call alone would
// have answered: its integer, nil, array, or error (an error raised inside one call is caught
// and becomes that call's element; the calls after it still run). A batch of one is the call's
// own script, unchanged.
//
// What this changes for Redlock: nothing a master could tell apart. Calls to one master were
// already pipelined in the order sent, each atomic; in a batch they run in that same order,
// atomically together. Each call's reply reaches its own handler. The encoding is RESP, built
// here (no hiredis formatting), so that a batch is appended to the connection in one piece.
//
// Pure: no I/O. NodeClient owns one per connection and the handlers beside it.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace lw {

// The batch script over `bodies` (script i of a call is bodies[i], 0-based). KEYS: every
// call's keys, in call order. ARGV: per call, its script index, its key count, its argument
// count, then its arguments. Answers an array with one element per call.
std::string BatchScriptBody(std::span<const char* const> bodies);

class ScriptBatch {
 public:
  // Queues one call of script `index` with its KEYS and ARGV.
  void Add(size_t index, std::span<const std::string_view> keys,
           std::span<const std::string_view> args);
  size_t size() const { return calls_; }
  bool empty() const { return calls_ == 0; }
  // Script index of the first call (the only one when size() == 1).
  size_t first_index() const { return first_index_; }

  // The RESP command running every queued call. For one call: `verb script numkeys keys args`
  // of its own script; for several: of the batch script. `verb` is EVALSHA or EVAL and
  // `script` the matching sha or body (of the call's own script, or of the batch script).
  std::string Command(std::string_view verb, std::string_view script) const;

  void Clear();

 private:
  std::string keys_;  // RESP bulk strings: every call's keys
  std::string args_;  // RESP bulk strings: per call, index, key count, argument count, arguments
  size_t first_args_at_ = 0;  // in args_: where the first call's own arguments start
  size_t calls_ = 0;
  size_t key_words_ = 0;
  size_t arg_words_ = 0;  // headers included
  size_t first_index_ = 0;
  size_t first_keys_ = 0;
  size_t first_args_ = 0;
};

// RESP: appends "$<len>\r\n<text>\r\n".
void AppendBulk(std::string& out, std::string_view text);

}  // namespace lw
