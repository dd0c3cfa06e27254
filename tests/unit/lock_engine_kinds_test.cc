// The engine with each lock kind, against fake masters that answer the kinds' scripts
// (fake_node.h): semaphores, read-write locks and elections queue, contend, hand over and
// release as their kind says. The scripts themselves run against real masters in
// tests/integration/kinds_test.cc.

#include "engine_test_support.h"

#include "core/election_record.h"

namespace lw::engine_test {
namespace {

const LockShape kTwoPermits{LockKind::kSemaphore, 2};

AcquireKind Semaphore() { return {.shape = kTwoPermits, .shared = false, .hold_as = 0, .payload = {}}; }
AcquireKind Reader() { return {.shape = {}, .shared = true, .hold_as = 0, .payload = {}}; }
AcquireKind Campaign(std::string payload) {
  return {.shape = LockShape{LockKind::kElection}, .shared = false, .hold_as = 0,
          .payload = std::move(payload)};
}

class LockEngineKindsTest : public LockEngineTest {
 protected:
  AcquireRecord* Granted(SessionId session, const std::string& resource, AcquireKind kind,
                         bool fence = false) {
    AcquireRecord* rec = Acquire(session, resource, 10000, 0, false, fence, std::move(kind));
    EXPECT_TRUE(RunUntil([rec] { return rec->calls > 0; }));
    EXPECT_TRUE(rec->granted()) << rec->Describe();
    return rec;
  }
  // Masters whose readers set of `resource` holds `n` live readers.
  int MastersWithReaders(const std::string& resource, size_t n) {
    int out = 0;
    for (auto& m : nodes_) out += m->Readers(Key(resource) + "\x1freaders") == n ? 1 : 0;
    return out;
  }
};

TEST_F(LockEngineKindsTest, ASemaphoreGrantsItsPermitsAndTheNextWaiterGetsAFreedOne) {
  MakeEngine();
  AcquireRecord* a = Granted(1, "pool", Semaphore());
  AcquireRecord* b = Granted(2, "pool", Semaphore());
  ASSERT_TRUE(a->granted() && b->granted());
  EXPECT_EQ(a->grant().mode, HoldMode::kPermit);
  EXPECT_NE(a->grant().permit, b->grant().permit) << "two holders, two permits";
  for (auto& m : nodes_) {
    EXPECT_EQ(m->Holder(Key("pool")), kTwoPermits.Marker()) << "the marker names the kind";
    EXPECT_TRUE(m->Holder(PermitKey("lock:", "pool", a->grant().permit)));
  }
  AcquireRecord* c = Acquire(3, "pool", 10000, 2000, false, false, Semaphore());
  RunFor(50);
  EXPECT_EQ(c->calls, 0) << "both permits are held here: the third waits, without contending";
  EXPECT_EQ(engine_->books().AllWaiters(10).size(), 1u);
  Release(1, "pool", a->grant().token);
  ASSERT_TRUE(RunUntil([c] { return c->calls > 0; }));
  ASSERT_TRUE(c->granted()) << c->Describe();
  EXPECT_EQ(c->grant().permit, a->grant().permit) << "the freed permit";
  EXPECT_EQ(engine_->locks_held(), 2u);
}

TEST_F(LockEngineKindsTest, ASemaphoreOfAnotherSizeOrAMutexIsAKindMismatch) {
  MakeEngine();
  Granted(1, "pool", Semaphore());
  AcquireRecord* mutex = Acquire(2, "pool", 10000, 0);
  AcquireRecord* three = Acquire(3, "pool", 10000, 0, false, false,
                                 {.shape = {LockKind::kSemaphore, 3}, .shared = false,
                                  .hold_as = 0, .payload = {}});
  ASSERT_TRUE(RunUntil([&] { return mutex->calls > 0 && three->calls > 0; }));
  EXPECT_EQ(mutex->failure().code, ErrorCode::kKindMismatch);
  EXPECT_EQ(three->failure().code, ErrorCode::kKindMismatch);
  // Another agent's mutex on the masters: the semaphore's attempt names what it found.
  for (auto& m : nodes_) m->Put(Key("held-elsewhere"), "someone", 10000);
  AcquireRecord* sem = Acquire(4, "held-elsewhere", 10000, 1000, false, false, Semaphore());
  ASSERT_TRUE(RunUntil([sem] { return sem->calls > 0; }));
  ASSERT_FALSE(sem->granted());
  EXPECT_EQ(sem->failure().code, ErrorCode::kKindMismatch);
  EXPECT_THAT(sem->failure().message, ::testing::HasSubstr("held exclusively on a master"));
}

TEST_F(LockEngineKindsTest, ReadersShareAndAWriterQueuedHereIsNotOvertakenByALaterReader) {
  MakeEngine();
  AcquireRecord* r1 = Granted(1, "cfg", Reader());
  AcquireRecord* r2 = Granted(2, "cfg", Reader());
  ASSERT_TRUE(r1->granted() && r2->granted());
  EXPECT_EQ(r1->grant().mode, HoldMode::kShared);
  EXPECT_EQ(MastersWithReaders("cfg", 2), kNodes);
  AcquireRecord* writer = Acquire(3, "cfg", 10000, 3000);
  AcquireRecord* late_reader = Acquire(4, "cfg", 10000, 3000, false, false, Reader());
  RunFor(50);
  EXPECT_EQ(writer->calls, 0);
  EXPECT_EQ(late_reader->calls, 0) << "a reader behind a queued writer waits for it";
  Release(1, "cfg", r1->grant().token);
  Release(2, "cfg", r2->grant().token);
  ASSERT_TRUE(RunUntil([writer] { return writer->calls > 0; }));
  ASSERT_TRUE(writer->granted()) << writer->Describe();
  EXPECT_EQ(late_reader->calls, 0) << "the writer holds it";
  EXPECT_EQ(MastersWithReaders("cfg", 0), kNodes);
  Release(3, "cfg", writer->grant().token);
  ASSERT_TRUE(RunUntil([late_reader] { return late_reader->calls > 0; }));
  EXPECT_TRUE(late_reader->granted()) << late_reader->Describe();
  EXPECT_EQ(grant_order_, (std::vector<SessionId>{1, 2, 3, 4}));
}

TEST_F(LockEngineKindsTest, AWriterRefusedForReadersElsewhereLeavesItsMarkAndDropsItOnceGranted) {
  MakeEngine(Options(/*node_timeout_ms=*/50, /*retry_delay_ms=*/20, /*retry_jitter_ms=*/5));
  // Readers through another agent: a second engine on the same masters.
  EngineOptions other_options = Options();
  other_options.value_prefix = "other:";
  LockEngine other(&loop_, NodePtrs(), other_options);
  std::optional<std::variant<Grant, Failure>> reader;
  other.Acquire(9, "cfg", 10000, 0, false, [&](const auto& r) { reader = r; }, false, Reader());
  ASSERT_TRUE(RunUntil([&] { return reader.has_value(); }));
  ASSERT_TRUE(std::holds_alternative<Grant>(*reader));

  AcquireRecord* writer = Acquire(1, "cfg", 10000, 3000);
  const std::string mark_key = WriterWaitingKey("lock:", "cfg");
  ASSERT_TRUE(RunUntil([&] {
    for (auto& m : nodes_) {
      if (!m->Holder(mark_key)) return false;
    }
    return true;
  })) << "refused for readers, the writer leaves its mark on every master";
  // New readers are refused while it waits.
  std::optional<std::variant<Grant, Failure>> refused;
  other.Acquire(8, "cfg", 10000, 0, false, [&](const auto& r) { refused = r; }, false, Reader());
  ASSERT_TRUE(RunUntil([&] { return refused.has_value(); }));
  ASSERT_TRUE(std::holds_alternative<Failure>(*refused));
  EXPECT_THAT(std::get<Failure>(*refused).message, ::testing::HasSubstr("a writer waits"));

  std::optional<std::optional<Failure>> released;
  other.Release(9, "cfg", std::get<Grant>(*reader).token,
                [&](const std::optional<Failure>& f) { released = f; });
  ASSERT_TRUE(RunUntil([writer] { return writer->calls > 0; }));
  ASSERT_TRUE(writer->granted()) << writer->Describe();
  ASSERT_TRUE(RunUntilQuiet());
  for (auto& m : nodes_) EXPECT_FALSE(m->Holder(mark_key)) << "node " << m->index();
  other.Shutdown([] {});
  ASSERT_TRUE(RunUntilQuiet());
}

TEST_F(LockEngineKindsTest, AnElectionsLeaderGetsATermAndItsRecordWhichItsReleaseRemoves) {
  MakeEngine();
  AcquireRecord* first = Granted(1, "jobs", Campaign(R"({"v":"a"})"));
  ASSERT_TRUE(first->granted());
  ASSERT_TRUE(first->grant().fence);
  EXPECT_EQ(*first->grant().fence, 1) << "an election is always fenced: the fence is the term";
  const std::string record_key = LeaderKey("lock:", "jobs");
  for (auto& m : nodes_) {
    const auto stored = m->Holder(record_key);
    ASSERT_TRUE(stored) << "node " << m->index();
    const auto record = ParseStoredRecord(*stored);
    ASSERT_TRUE(record);
    EXPECT_EQ(record->record.term, 1);
    EXPECT_EQ(record->record.payload, R"({"v":"a"})");
  }
  const auto views = engine_->books().AllLocks();
  ASSERT_EQ(views.size(), 1u);
  ASSERT_TRUE(views[0].election);
  EXPECT_EQ(views[0].election->term, 1);

  AcquireRecord* second = Acquire(2, "jobs", 10000, 3000, false, false, Campaign("{}"));
  Release(1, "jobs", first->grant().token);
  ASSERT_TRUE(RunUntil([second] { return second->calls > 0; }));
  ASSERT_TRUE(second->granted()) << second->Describe();
  EXPECT_EQ(second->grant().fence, 2) << "the next leader's term, never a local hand-off";
  Release(2, "jobs", second->grant().token);
  ASSERT_TRUE(RunUntilQuiet());
  for (auto& m : nodes_) {
    EXPECT_FALSE(m->Holder(record_key)) << "released: the record goes with the hold";
    EXPECT_FALSE(m->Holder(Key("jobs")));
  }
}

TEST_F(LockEngineKindsTest, AReadHoldIsExtendedAndReleasedInTheReadersSet) {
  MakeEngine();
  AcquireRecord* r = Granted(1, "cfg", Reader());
  ExtendRecord* e = Extend(1, "cfg", r->grant().token, 20000);
  ASSERT_TRUE(RunUntil([e] { return e->calls > 0; }));
  EXPECT_TRUE(e->extended());
  Release(1, "cfg", r->grant().token);
  ASSERT_TRUE(RunUntilQuiet());
  EXPECT_EQ(MastersWithReaders("cfg", 0), kNodes);
  EXPECT_EQ(engine_->locks_held(), 0u);
}

// docs/safety.md §7, "Marked readers": native claims only once the fleet allows them, only for
// a plain exclusive claim, and not where this agent's own reservation may be waiting.
TEST_F(LockEngineKindsTest, PlainClaimsGoNativeOnlyWhenAllowedAndWhereNoReservationWaits) {
  EngineOptions o = Options();
  o.mark_readers = true;
  MakeEngine(o);
  const auto native_sets = [this] {
    size_t n = 0;
    for (const auto& c : nodes_[0]->Commands(fake::FakeNode::Op::kSet)) n += c.native ? 1 : 0;
    return n;
  };
  AcquireRecord* before = Granted(1, "plain", AcquireKind{});
  Release(1, "plain", before->grant().token);
  EXPECT_EQ(native_sets(), 0u) << "not before SetNativeClaims";

  engine_->SetNativeClaims(true);
  AcquireRecord* first = Granted(1, "plain", AcquireKind{});
  EXPECT_EQ(native_sets(), 1u) << "a plain claim of a resource idle here is a SET NX";
  Granted(2, "readers", Reader());
  Granted(3, "fenced", AcquireKind{}, /*fence=*/true);
  EXPECT_EQ(native_sets(), 1u) << "read holds and fenced claims stay scripts";

  // Contended here: the next claim after a grant may meet this agent's reservation.
  AcquireRecord* next = Acquire(4, "plain", 10000, 5000, false);
  RunFor(20);
  Release(1, "plain", first->grant().token);
  ASSERT_TRUE(RunUntil([next] { return next->calls > 0; }));
  ASSERT_TRUE(next->granted()) << next->Describe();
  EXPECT_EQ(native_sets(), 1u) << "the claim after a grant through this resource is the script";

  engine_->SetNativeClaims(false);
  EXPECT_FALSE(engine_->native_claims());
}

}  // namespace
}  // namespace lw::engine_test
