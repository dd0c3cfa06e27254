#include <gtest/gtest.h>

#include "agent/session.h"

namespace lw {
namespace {

using namespace std::string_view_literals;

TEST(PrintableCmdline, ArgumentsBecomeOneLine) {
  EXPECT_EQ(PrintableCmdline("python3\0worker.py\0--queue\0orders\0"sv, 512),
            "python3 worker.py --queue orders");
  EXPECT_EQ(PrintableCmdline(""sv, 512), "");
}

TEST(PrintableCmdline, ControlBytesCannotForgeLines) {
  EXPECT_EQ(PrintableCmdline("a\nb\x1b[31m\0"sv, 512), "a?b?[31m");
}

TEST(PrintableCmdline, LongCommandLinesAreCut) {
  const std::string raw(600, 'x');
  const std::string out = PrintableCmdline(raw, 512);
  EXPECT_EQ(out, std::string(512, 'x') + "\u2026");
}

}  // namespace
}  // namespace lw
