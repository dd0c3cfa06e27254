#pragma once
// Files and directories for tests: read a file whole, write one with given permissions, make a
// fresh temporary directory.

#include <sys/types.h>

#include <string>

namespace lw::test {

// The whole file, bytes as they are; "" when it cannot be read (a log not written yet).
std::string ReadFile(const std::string& path);

// The whole file; throws std::runtime_error when it cannot be read.
std::string ReadFileOrThrow(const std::string& path);

// Writes `contents` to `path` (replacing the file) and gives it the permission bits `mode`
// (0600 unless told: tests write tokens and passwords). Returns `path`. Throws
// std::runtime_error when the file cannot be written.
std::string WriteFile(const std::string& path, const std::string& contents, mode_t mode = 0600);

// Creates a new empty directory /tmp/<prefix>XXXXXX (mkdtemp) and returns its path; throws
// std::runtime_error when it cannot.
std::string MakeTempDir(const std::string& prefix);

}  // namespace lw::test
