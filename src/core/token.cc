#include "core/token.h"

#include <sys/random.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace lw {

namespace {

// Kernel randomness fetched 4 KiB at a time (one getrandom call per ~200 tokens instead of one
// per token: it showed in the agent's profile). Each thread has its own pool; bytes are used
// once and never reused.
struct RandomPool {
  unsigned char bytes[4096];
  size_t used = sizeof bytes;

  void Take(unsigned char* out, size_t n) {
    if (used + n > sizeof bytes) Refill();
    std::memcpy(out, bytes + used, n);
    std::memset(bytes + used, 0, n);  // a token's bytes do not linger in memory
    used += n;
  }

  void Refill() {
    size_t got = 0;
    while (got < sizeof bytes) {
      const ssize_t n = getrandom(bytes + got, sizeof bytes - got, 0);
      if (n < 0) {
        if (errno == EINTR) continue;
        throw std::runtime_error("getrandom failed");
      }
      got += static_cast<size_t>(n);
    }
    used = 0;
  }
};

thread_local RandomPool t_pool;

}  // namespace

std::string NewToken() {
  unsigned char raw[kTokenBytes];
  t_pool.Take(raw, sizeof raw);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(2 * kTokenBytes, '0');
  for (size_t i = 0; i < kTokenBytes; ++i) {
    out[2 * i] = kHex[raw[i] >> 4];
    out[2 * i + 1] = kHex[raw[i] & 0xF];
  }
  return out;
}

bool IsWellFormedToken(std::string_view s) {
  if (s.size() != 2 * kTokenBytes) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace lw
