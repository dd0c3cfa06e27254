#include "core/token.h"

#include <sys/random.h>

#include <cerrno>
#include <stdexcept>

namespace lw {

std::string NewToken() {
  unsigned char raw[kTokenBytes];
  size_t got = 0;
  while (got < sizeof raw) {
    const ssize_t n = getrandom(raw + got, sizeof raw - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error("getrandom failed");
    }
    got += static_cast<size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(2 * kTokenBytes, '0');
  for (size_t i = 0; i < kTokenBytes; ++i) {
    out[2 * i] = kHex[raw[i] >> 4];
    out[2 * i + 1] = kHex[raw[i] & 0xF];
  }
  return out;
}

bool IsWellFormedToken(const std::string& s) {
  if (s.size() != 2 * kTokenBytes) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace lw
