// Unit tests for the resume op's decoding (src/protocol): its fields, defaults and the
// combinations refused.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "decode_helpers.h"
#include "protocol/messages.h"

namespace lw::protocol::resume_decode_test {
namespace {

using namespace decode_helpers;
using ::testing::HasSubstr;

const json kResume = {{"id", 4}, {"op", "resume"}, {"resource", "db"}, {"token", kToken}};

TEST(ResumeDecodeTest, ALocksHoldWithDefaults) {
  const auto r = MustDecodeAs<ResumeRequest>(kResume.dump());
  EXPECT_EQ(r.resource, "db");
  EXPECT_EQ(r.token, kToken);
  EXPECT_EQ(r.ttl_ms, 30'000);
  EXPECT_FALSE(r.renew);
  EXPECT_EQ(r.fence, 0);
  EXPECT_EQ(r.permits, 0);
  EXPECT_EQ(r.permit, -1);
  EXPECT_FALSE(r.shared);
}

TEST(ResumeDecodeTest, EveryFieldAsTheGrantAnswered) {
  json line = kResume;
  line["ttl_ms"] = 5000;
  line["renew"] = true;
  line["fence"] = 41;
  line["permits"] = 3;
  line["permit"] = 2;
  const auto r = MustDecodeAs<ResumeRequest>(line.dump());
  EXPECT_EQ(r.ttl_ms, 5000);
  EXPECT_TRUE(r.renew);
  EXPECT_EQ(r.fence, 41);
  EXPECT_EQ(r.permits, 3);
  EXPECT_EQ(r.permit, 2);
  EXPECT_TRUE(MustDecodeAs<ResumeRequest>(With(kResume, "shared", true)).shared);
}

TEST(ResumeDecodeTest, RefusesWhatNamesNoHold) {
  EXPECT_THAT(MustFail(With(kResume, "permit", 0)).message, HasSubstr("go together"));
  EXPECT_THAT(MustFail(With(kResume, "permits", 2)).message, HasSubstr("go together"));
  json both = kResume;
  both["permits"] = 2;
  both["permit"] = 0;
  both["shared"] = false;
  EXPECT_THAT(MustFail(both.dump()).message, HasSubstr("no shared holds"));
  json fenced_reader = kResume;
  fenced_reader["fence"] = 3;
  fenced_reader["shared"] = true;
  EXPECT_THAT(MustFail(fenced_reader.dump()).message, HasSubstr("read hold has no fence"));
  EXPECT_THAT(MustFail(With(kResume, "fence", 0)).message, HasSubstr("\"fence\""));
  EXPECT_THAT(MustFail(With(kResume, "fence", true)).message, HasSubstr("\"fence\""));
  EXPECT_THAT(MustFail(With(kResume, "permit", 1024)).message, HasSubstr("\"permit\""));
  EXPECT_THAT(MustFail(With(kResume, "token", "abc")).message, HasSubstr("token"));
  EXPECT_THAT(MustFail(With(kResume, "detach", true)).message, HasSubstr("detach"));
  EXPECT_EQ(MustFail(With(kResume, "ttl_ms", 1)).id, json(4));
}

}  // namespace
}  // namespace lw::protocol::resume_decode_test
