#pragma once
// Invariant checks for the fuzz targets. A failed check prints what was violated and aborts;
// libFuzzer reports the abort as a crash and saves the input (crash-<sha1>) to reproduce it:
//   build-fuzz/tests/fuzz/protocol_fuzz crash-<sha1>

#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace lw::fuzz {

[[noreturn]] inline void Fail(const char* file, int line, const char* condition,
                              std::string_view detail) {
  std::fprintf(stderr, "\n%s:%d: fuzz invariant violated: %s\n  %.*s\n", file, line, condition,
               static_cast<int>(detail.size()), detail.data());
  std::abort();
}

}  // namespace lw::fuzz

// detail: anything convertible to std::string_view, evaluated only on failure.
#define LW_FUZZ_CHECK(condition, detail)                                          \
  do {                                                                            \
    if (!(condition)) ::lw::fuzz::Fail(__FILE__, __LINE__, #condition, (detail)); \
  } while (false)
