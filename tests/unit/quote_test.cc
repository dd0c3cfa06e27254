// QuoteClientText: the one way client text appears in messages and logs.

#include "core/quote.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>

namespace lw {
namespace {

std::string NlohmannQuoted(const std::string& text) {
  return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

TEST(QuoteClientText, EscapesWhatCouldEndALineOrForgeAField) {
  EXPECT_EQ(QuoteClientText("orders:1"), "\"orders:1\"");
  EXPECT_EQ(QuoteClientText("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(QuoteClientText("x\ny\r\t\b\f"), "\"x\\ny\\r\\t\\b\\f\"");
  EXPECT_EQ(QuoteClientText(std::string("\x01\x1f", 2)), "\"\\u0001\\u001f\"");
  EXPECT_EQ(QuoteClientText(std::string("nul\0", 4)), "\"nul\\u0000\"");
}

TEST(QuoteClientText, InvalidUtf8BecomesReplacementCharacters) {
  EXPECT_EQ(QuoteClientText("\xff"), "\"\xEF\xBF\xBD\"");
  EXPECT_EQ(QuoteClientText("a\xC3"), "\"a\xEF\xBF\xBD\"");            // cut sequence
  EXPECT_EQ(QuoteClientText("\xED\xA0\x80"), "\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\"");  // surrogate
  EXPECT_EQ(QuoteClientText("\xC3\xA9t\xC3\xA9"), "\"\xC3\xA9t\xC3\xA9\"");  // été stays
}

TEST(QuoteClientText, LongTextIsCutOnACharacterAndSaysHowLongItWas) {
  const std::string text = std::string(63, 'a') + "\xC3\xA9" + "zz";  // é straddles byte 64
  EXPECT_EQ(QuoteClientText(text, 64), "\"" + std::string(63, 'a') + "\"... (67 bytes)");
  EXPECT_EQ(QuoteClientText("short", 64), "\"short\"");
  EXPECT_EQ(ShortenUtf8("\xC3\xA9", 1), "");
}

// For well-formed UTF-8 (every string a JSON parser accepts), the output is exactly the JSON
// serializer's, which the protocol used before: messages did not change. Seeded: the same
// strings every run.
TEST(QuoteClientText, MatchesAJsonSerializerOnWellFormedText) {
  std::mt19937 rng(16);
  const std::string pieces[] = {"a", "Z", "0", " ", "\"", "\\", "\n", "\t", std::string("\0", 1),
                                "\x7f", "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x94\x92", "/"};
  for (int n = 0; n < 2000; ++n) {
    std::string text;
    const int len = static_cast<int>(rng() % 12);
    for (int k = 0; k < len; ++k) text += pieces[rng() % std::size(pieces)];
    ASSERT_EQ(QuoteClientText(text), NlohmannQuoted(text)) << n;
  }
}

}  // namespace
}  // namespace lw
