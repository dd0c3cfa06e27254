#include "redis/script_batch.h"

#include <charconv>

namespace lw {
namespace {

void AppendDecimal(std::string& out, size_t n) {
  char digits[24];
  const auto end = std::to_chars(digits, digits + sizeof digits, n).ptr;
  out.append(digits, static_cast<size_t>(end - digits));
}

void AppendBulkNumber(std::string& out, size_t n) {
  char digits[24];
  const auto end = std::to_chars(digits, digits + sizeof digits, n).ptr;
  AppendBulk(out, std::string_view(digits, static_cast<size_t>(end - digits)));
}

// "*<words>\r\n" verb script numkeys
std::string Head(size_t words, std::string_view verb, std::string_view script, size_t numkeys,
                 size_t reserve) {
  std::string out;
  out.reserve(reserve + script.size() + 64);
  out += '*';
  AppendDecimal(out, words + 3);
  out += "\r\n";
  AppendBulk(out, verb);
  AppendBulk(out, script);
  AppendBulkNumber(out, numkeys);
  return out;
}

}  // namespace

void AppendBulk(std::string& out, std::string_view text) {
  char head[24] = {'$'};
  char* end = std::to_chars(head + 1, head + sizeof head - 2, text.size()).ptr;
  *end++ = '\r';
  *end++ = '\n';
  out.append(head, static_cast<size_t>(end - head));
  out.append(text);
  out.append("\r\n", 2);
}

std::string BatchScriptBody(std::span<const char* const> bodies) {
  // Each body becomes a function whose parameters shadow the KEYS and ARGV globals, so it
  // runs unchanged on its own call's slices. A Lua error inside one call (a failed
  // redis.call) is caught and answered as that call's error; false stands for nil (a nil
  // would end the array).
  std::string s = "local S = {";
  for (const char* body : bodies) {
    s += "function(KEYS, ARGV) ";
    s += body;
    s += " end,";
  }
  // The KEYS and ARGV tables are reused from call to call (entries past a call's own count
  // cleared): building two tables per call costs the master more than most calls' own work.
  s += "} "
       "local out, k, a, n = {}, 1, 1, #ARGV "
       "local keys, args, pk, pa = {}, {}, 0, 0 "
       "while a <= n do "
       "local f, nk, na = S[tonumber(ARGV[a]) + 1], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]) "
       "for j = 1, nk do keys[j] = KEYS[k + j - 1] end for j = nk + 1, pk do keys[j] = nil end "
       "for j = 1, na do args[j] = ARGV[a + 2 + j] end for j = na + 1, pa do args[j] = nil end "
       "pk, pa, k, a = nk, na, k + nk, a + 3 + na "
       "local ok, r = pcall(f, keys, args) "
       "if not ok then if type(r) == 'table' and r.err then out[#out + 1] = r "
       "else out[#out + 1] = {err = tostring(r)} end "
       "elseif r == nil then out[#out + 1] = false else out[#out + 1] = r end "
       "end "
       "return out";
  return s;
}

void ScriptBatch::Add(size_t index, std::span<const std::string_view> keys,
                      std::span<const std::string_view> args) {
  if (calls_ == 0) {  // a batch is built afresh each loop turn: grow it once, not word by word
    keys_.reserve(1024);
    args_.reserve(2048);
  }
  for (std::string_view k : keys) AppendBulk(keys_, k);
  AppendBulkNumber(args_, index);
  AppendBulkNumber(args_, keys.size());
  AppendBulkNumber(args_, args.size());
  if (calls_ == 0) {
    first_args_at_ = args_.size();
    first_index_ = index;
    first_keys_ = keys.size();
    first_args_ = args.size();
  }
  for (std::string_view a : args) AppendBulk(args_, a);
  ++calls_;
  key_words_ += keys.size();
  arg_words_ += 3 + args.size();
}

std::string ScriptBatch::Command(std::string_view verb, std::string_view script) const {
  if (calls_ == 1) {
    const std::string_view own_args = std::string_view(args_).substr(first_args_at_);
    std::string out = Head(first_keys_ + first_args_, verb, script, first_keys_,
                           keys_.size() + own_args.size());
    out += keys_;
    out += own_args;
    return out;
  }
  std::string out =
      Head(key_words_ + arg_words_, verb, script, key_words_, keys_.size() + args_.size());
  out += keys_;
  out += args_;
  return out;
}

void ScriptBatch::Clear() {
  keys_.clear();
  args_.clear();
  first_args_at_ = calls_ = key_words_ = arg_words_ = 0;
  first_index_ = first_keys_ = first_args_ = 0;
}

}  // namespace lw
