// The in-place upgrade's hand-over: its state's versioned form, the asks' aged wait, and the
// descriptors passed beside it over a real socket pair.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "agent/fd_passing.h"
#include "agent/handover_state.h"

namespace lw::handover {
namespace {

HandedHold SomeHold() {
  HandedHold h;
  h.resource = "jobs/nightly";
  h.token = std::string(40, 'a');
  h.value = std::string(40, 'b');
  h.ttl_ms = 2'000;
  h.renew = true;
  h.fence = 41;
  h.shape = LockShape{LockKind::kSemaphore, 4};
  h.mode = HoldMode::kPermit;
  h.part = 3;
  h.note = "{\"leader\":1}";
  h.acquired = std::chrono::steady_clock::time_point(std::chrono::nanoseconds(123000000000));
  h.valid_until = std::chrono::steady_clock::time_point(std::chrono::nanoseconds(123456789012));
  return h;
}

State EveryField(int format) {
  State st;
  st.format = format;
  st.version = "0.2.0";
  st.agent_id = "c075dc218fc50dd3";
  st.masters = {"127.0.0.1:7301", "127.0.0.1:7302"};
  st.key_prefix = "lock:";
  st.fence_prefix = "fence:";
  st.listener = 0;
  st.previous_pid = 4242;
  st.held_since_ns = 7;
  SessionState s;
  s.fd = 1;
  s.input = "{\"op\":\"hel";
  s.holds.push_back(SomeHold());
  s.asks.push_back({"{\"op\":\"acquire\",\"resource\":\"x\",\"wait_ms\":500}", 120});
  s.observed = {"leader/a"};
  s.upgrade_id = "\"up\"";
  st.sessions.push_back(s);
  st.leases.push_back({1000, {SomeHold()}, {{"jobs/nightly", std::string(40, 'a'),
                                             Peer{77, 1000, 1000, "python3 job.py"}}}, {}});
  if (format >= kFormatPreCopied) {  // what format 3 adds
    st.sessions[0].id = 9;
    st.sessions[0].holds[0].serial = 17;
    st.sessions[0].kept.push_back({18, 3'000, SomeHold().valid_until});
    st.leases[0].kept.push_back({19, 4'000, SomeHold().acquired});
    st.gone = {21, 22};
  }
  if (format >= kFormatReentrant) {  // what format 4 adds
    st.sessions[0].holds[0].owner = 140234567890432;
    st.sessions[0].holds[0].depth = 3;
    st.sessions[0].kept[0].depth = 2;
  }
  return st;
}

// Each format this build reads carries every field: format 1 is what 0.2.0 writes (an upgrade
// from it) and what this build writes for a new process that reads only that (a rollback).
class HandoverFormats : public ::testing::TestWithParam<int> {};

TEST_P(HandoverFormats, EveryFieldSurvivesTheRoundTrip) {
  const State st = EveryField(GetParam());
  const SessionState& s = st.sessions[0];
  const std::string encoded = Encode(st);
  EXPECT_EQ(encoded.front() == '{', GetParam() == kFormatJson) << "format 1 is JSON";
  auto decoded = Decode(encoded);
  ASSERT_TRUE(std::holds_alternative<State>(decoded)) << std::get<std::string>(decoded);
  const State& back = std::get<State>(decoded);
  EXPECT_EQ(back.agent_id, st.agent_id);
  EXPECT_EQ(back.masters, st.masters);
  EXPECT_EQ(back.key_prefix, "lock:");
  EXPECT_EQ(back.fence_prefix, "fence:");
  EXPECT_EQ(back.previous_pid, 4242);
  EXPECT_EQ(back.held_since_ns, 7);
  ASSERT_EQ(back.sessions.size(), 1u);
  const SessionState& bs = back.sessions[0];
  EXPECT_EQ(bs.fd, 1);
  EXPECT_EQ(bs.input, s.input);
  EXPECT_EQ(bs.upgrade_id, "\"up\"");
  EXPECT_EQ(bs.observed, s.observed);
  ASSERT_EQ(bs.asks.size(), 1u);
  EXPECT_EQ(bs.asks[0].line, s.asks[0].line);
  EXPECT_EQ(bs.asks[0].age_ms, 120);
  ASSERT_EQ(bs.holds.size(), 1u);
  const HandedHold& h = bs.holds[0];
  const HandedHold want = SomeHold();
  EXPECT_EQ(h.resource, want.resource);
  EXPECT_EQ(h.token, want.token);
  EXPECT_EQ(h.value, want.value);
  EXPECT_EQ(h.ttl_ms, want.ttl_ms);
  EXPECT_TRUE(h.renew);
  EXPECT_EQ(h.fence, want.fence);
  EXPECT_EQ(h.shape, want.shape);
  EXPECT_EQ(h.mode, HoldMode::kPermit);
  EXPECT_EQ(h.part, 3);
  EXPECT_EQ(h.note, want.note);
  EXPECT_EQ(h.valid_until, want.valid_until) << "the deadline is CLOCK_MONOTONIC, to the ns";
  EXPECT_EQ(h.acquired, want.acquired);
  ASSERT_EQ(back.leases.size(), 1u);
  EXPECT_EQ(back.leases[0].uid, 1000u);
  ASSERT_EQ(back.leases[0].creators.size(), 1u);
  EXPECT_EQ(back.leases[0].creators[0].creator.cmdline, "python3 job.py");
  EXPECT_EQ(back.leases[0].creators[0].creator.pid, 77);
  EXPECT_EQ(back.format, GetParam());
  if (GetParam() >= kFormatPreCopied) {
    EXPECT_EQ(bs.id, 9u);
    EXPECT_EQ(h.serial, 17u);
    ASSERT_EQ(bs.kept.size(), 1u);
    EXPECT_EQ(bs.kept[0].serial, 18u);
    EXPECT_EQ(bs.kept[0].ttl_ms, 3'000);
    EXPECT_EQ(bs.kept[0].valid_until, want.valid_until);
    ASSERT_EQ(back.leases[0].kept.size(), 1u);
    EXPECT_EQ(back.leases[0].kept[0].serial, 19u);
    EXPECT_EQ(back.leases[0].kept[0].valid_until, want.acquired);
    EXPECT_EQ(back.gone, (std::vector<uint64_t>{21, 22}));
  }
  if (GetParam() >= kFormatReentrant) {
    EXPECT_EQ(h.owner, 140234567890432u);
    EXPECT_EQ(h.depth, 3);
    EXPECT_EQ(bs.kept[0].depth, 2);
  } else {
    EXPECT_EQ(h.depth, 1) << "formats before 4 carry no depth (an upgrade checks for none)";
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, HandoverFormats,
                         ::testing::Values(kFormatJson, kFormatBinary, kFormatPreCopied,
                                           kFormatReentrant));

TEST(HandoverState, APreCopySliceCarriesEachHoldWithItsSessionAndSerial) {
  PreCopy slice;
  HandedHold h = SomeHold();
  h.serial = 5;
  slice.holds.emplace_back(3, h);
  slice.holds.emplace_back(LeaseSessionOf(1000), SomeHold());
  const std::string encoded = EncodePreCopy(slice);
  EXPECT_TRUE(IsPreCopy(encoded));
  EXPECT_FALSE(IsPreCopy(Encode(EveryField(kFormatPreCopied)))) << "the state is not a slice";
  auto decoded = DecodePreCopy(encoded);
  ASSERT_TRUE(std::holds_alternative<PreCopy>(decoded)) << std::get<std::string>(decoded);
  const auto& back = std::get<PreCopy>(decoded).holds;
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].first, 3u);
  EXPECT_EQ(back[0].second.serial, 5u);
  EXPECT_EQ(back[0].second.valid_until, h.valid_until);
  EXPECT_EQ(back[0].second.note, h.note);
  EXPECT_EQ(back[1].first, LeaseSessionOf(1000));
  for (size_t cut : {encoded.size() - 1, size_t{6}}) {
    EXPECT_TRUE(std::holds_alternative<std::string>(DecodePreCopy(encoded.substr(0, cut))))
        << "a slice cut at " << cut << " is refused";
  }
  // Format 4's slices say so, and carry each hold's owner and depth.
  slice.format = kFormatReentrant;
  slice.holds[0].second.owner = 12;
  slice.holds[0].second.depth = 4;
  auto four = DecodePreCopy(EncodePreCopy(slice));
  ASSERT_TRUE(std::holds_alternative<PreCopy>(four)) << std::get<std::string>(four);
  EXPECT_EQ(std::get<PreCopy>(four).format, kFormatReentrant);
  EXPECT_EQ(std::get<PreCopy>(four).holds[0].second.owner, 12u);
  EXPECT_EQ(std::get<PreCopy>(four).holds[0].second.depth, 4);
  EXPECT_EQ(std::get<PreCopy>(four).holds[1].second.depth, 1);
}

TEST(HandoverState, AStateOf0_2_0IsRead) {
  // Written by 0.2.0 (format 1, the first), byte for byte as it wrote it.
  const std::string v020 =
      R"({"agent_id":"c075dc218fc50dd3","fence_prefix":"fence:","format":1,)"
      R"("held_since_ns":7,"key_prefix":"lock:","leases":[],"listener":0,)"
      R"("masters":["127.0.0.1:7301"],"previous_pid":4242,"sessions":[{"asks":[],"fd":1,)"
      R"("holds":[{"acquired_ns":123000000000,"fence":41,"kind":"mutex","mode":"exclusive",)"
      R"("part":-1,"permits":1,"renew":true,"resource":"jobs/a","token":"t","ttl_ms":2000,)"
      R"("valid_until_ns":123456789012,"value":"v"}],"input":"","observed":[],)"
      R"("upgrade_id":""}],"version":"0.2.0"})";
  auto decoded = Decode(v020);
  ASSERT_TRUE(std::holds_alternative<State>(decoded)) << std::get<std::string>(decoded);
  const State& st = std::get<State>(decoded);
  ASSERT_EQ(st.sessions.size(), 1u);
  ASSERT_EQ(st.sessions[0].holds.size(), 1u);
  EXPECT_EQ(st.sessions[0].holds[0].resource, "jobs/a");
  EXPECT_EQ(st.sessions[0].holds[0].fence, 41);
  EXPECT_EQ(st.version, "0.2.0");
}

TEST(HandoverState, TheNewestFormatBothProcessesReadIsWritten) {
  EXPECT_EQ(FormatFor({1, 2}), kFormatBinary);
  EXPECT_EQ(FormatFor({1}), kFormatJson) << "0.2.0's ready says only format 1";
  EXPECT_EQ(FormatFor({1, 2, 3}), kFormatPreCopied) << "a build before reentrant holds";
  EXPECT_EQ(FormatFor({3}), kFormatPreCopied);
  EXPECT_EQ(FormatFor({1, 2, 3, 4}), kFormatReentrant) << "a build of this tree";
  EXPECT_EQ(FormatFor({4}), kFormatReentrant);
  EXPECT_EQ(FormatFor({5}), 0);
  EXPECT_EQ(FormatFor({}), 0);
}

TEST(HandoverState, ATruncatedOrPaddedBinaryStateIsRefused) {
  const std::string whole = Encode(EveryField(kFormatBinary));
  for (size_t cut : {size_t{4}, size_t{9}, whole.size() / 2, whole.size() - 1}) {
    auto decoded = Decode(whole.substr(0, cut));
    ASSERT_TRUE(std::holds_alternative<std::string>(decoded)) << "cut at " << cut;
    EXPECT_NE(std::get<std::string>(decoded).find("malformed"), std::string::npos);
  }
  EXPECT_TRUE(std::holds_alternative<std::string>(Decode(whole + "x")));
  std::string huge_count = whole;
  huge_count.replace(8, 4, std::string("\xff\xff\xff\x7f", 4));  // the version's length
  EXPECT_TRUE(std::holds_alternative<std::string>(Decode(huge_count)));
}

TEST(HandoverState, AnotherFormatOrAMalformedStateIsRefusedWithTheReason) {
  State st;
  st.format = kFormat + 1;
  auto newer = Decode(Encode(st));
  ASSERT_TRUE(std::holds_alternative<std::string>(newer));
  EXPECT_NE(std::get<std::string>(newer).find("format " + std::to_string(kFormat + 1)),
            std::string::npos)
      << std::get<std::string>(newer);
  auto broken = Decode(R"({"format":1,"version":"x"})");
  ASSERT_TRUE(std::holds_alternative<std::string>(broken));
  EXPECT_NE(std::get<std::string>(broken).find("malformed"), std::string::npos);
  EXPECT_TRUE(std::holds_alternative<std::string>(Decode("not json")));
}

TEST(HandoverState, AnAskIsAskedAgainWithWhatIsLeftOfItsWait) {
  EXPECT_EQ(Aged(R"({"op":"acquire","wait_ms":500,"id":3})", 120),
            R"({"id":3,"op":"acquire","wait_ms":380})");
  EXPECT_EQ(Aged(R"({"op":"acquire","wait_ms":100})", 250), R"({"op":"acquire","wait_ms":0})");
  const std::string no_wait = R"({"op":"acquire","resource":"x"})";
  EXPECT_EQ(Aged(no_wait, 250), no_wait);
}

TEST(FdPassing, APayloadAndMoreDescriptorsThanOneChunkArriveInOrder) {
  int pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  // 300 descriptors: two chunks. Each is a pipe's read end, told apart by what is written.
  std::vector<int> reads, writes;
  for (int i = 0; i < 300; ++i) {
    int p[2];
    ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
    reads.push_back(p[0]);
    writes.push_back(p[1]);
  }
  const std::string payload(100'000, 'x');  // more than one socket buffer's worth
  int send_error = 0;
  std::thread sender([&] { send_error = SendMessage(pair[0], payload, reads).has_value(); });
  auto got = ReceiveMessage(pair[1], 5'000);
  sender.join();
  ASSERT_EQ(send_error, 0);
  ASSERT_TRUE(std::holds_alternative<Message>(got)) << std::get<std::string>(got);
  const Message& m = std::get<Message>(got);
  EXPECT_EQ(m.payload, payload);
  ASSERT_EQ(m.fds.size(), 300u);
  for (int i : {0, 249, 250, 299}) {
    const char c = static_cast<char>('A' + i % 26);
    ASSERT_EQ(write(writes[static_cast<size_t>(i)], &c, 1), 1);
    char r = 0;
    ASSERT_EQ(read(m.fds[static_cast<size_t>(i)], &r, 1), 1);
    EXPECT_EQ(r, c) << "descriptor " << i;
    EXPECT_NE(fcntl(m.fds[static_cast<size_t>(i)], F_GETFD) & FD_CLOEXEC, 0);
  }
  for (int fd : m.fds) close(fd);
  for (int fd : reads) close(fd);
  for (int fd : writes) close(fd);
  close(pair[0]);
  close(pair[1]);
}

// The old process's end is non-blocking (its loop polls it): a state larger than the socket's
// buffer waits for the reader instead of failing.
TEST(FdPassing, AStateLargerThanTheBufferCrossesANonBlockingSocket) {
  int pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, pair), 0);
  const std::string payload(8 << 20, 's');
  std::optional<std::string> send_error;
  std::thread sender([&] { send_error = SendMessage(pair[0], payload, {pair[0]}); });
  auto got = ReceiveMessage(pair[1], 20'000);
  sender.join();
  EXPECT_FALSE(send_error) << *send_error;
  ASSERT_TRUE(std::holds_alternative<Message>(got)) << std::get<std::string>(got);
  EXPECT_EQ(std::get<Message>(got).payload.size(), payload.size());
  ASSERT_EQ(std::get<Message>(got).fds.size(), 1u);
  close(std::get<Message>(got).fds[0]);
  close(pair[0]);
  close(pair[1]);
}

TEST(FdPassing, APeerThatClosesOrStaysSilentIsAnErrorNotAHang) {
  int pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  auto silent = ReceiveMessage(pair[1], 20);
  ASSERT_TRUE(std::holds_alternative<std::string>(silent));
  EXPECT_EQ(std::get<std::string>(silent), "timed out");
  close(pair[0]);
  auto closed = ReceiveMessage(pair[1], 1'000);
  ASSERT_TRUE(std::holds_alternative<std::string>(closed));
  EXPECT_NE(std::get<std::string>(closed).find("closed"), std::string::npos);
  close(pair[1]);
}

}  // namespace
}  // namespace lw::handover
