// Lapsed attempts (server/sched/reclaim.cc): an attempt whose lease expired or was lost stays
// claimable by the worker that held it until a newer attempt of its trial starts; its outcome,
// delivered late, counts and the lapse charges no failure (issue 44, item 1).
#include "tests/server/sched_fixture.h"

namespace spheret::sched {
namespace {

class LapseTest : public SchedulerTest {
 protected:
  // A one-trial sweep (trial 1000) leased to "a"; its lease then expires.
  void LeaseAndExpire(int max_restarts) {
    AddSweep(1, 1, 50, 1, 1, 0, max_restarts);
    AddWorker("a", 1);
    AddWorker("b", 1);
    ASSERT_EQ(Acquire("a").size(), 1u);
    clock_.AdvanceMs(kTtl + 1);
    Changes changes;
    ASSERT_EQ(scheduler_.ExpireLeases(clock_.NowMs(), &changes), 1);
    expired_ = changes;
  }

  absl::StatusOr<std::vector<AttemptId>> Register(const std::string& id,
                                                  const std::vector<AttemptId>& running,
                                                  const std::vector<AttemptId>& finished,
                                                  Changes* changes) {
    WorkerRecord worker;
    worker.worker_id = id;
    worker.cpu_slots = 1;
    return scheduler_.Register(worker, running, clock_.NowMs(), changes, finished);
  }

  absl::StatusOr<TrialState> Finish(const std::string& worker, int attempt, TrialState outcome,
                                    Changes* changes) {
    return scheduler_.Finish({1000, attempt, outcome, 0, "", clock_.NowMs()}, worker, changes);
  }

  Changes expired_;
};

TEST_F(LapseTest, AnOutcomeSpooledPastTheTtlCountsAndTakesTheFailureBack) {
  LeaseAndExpire(/*max_restarts=*/0);
  ASSERT_EQ(expired_.trials.back().state, TrialState::kFailed);
  EXPECT_EQ(expired_.trials.back().failures, 1);
  EXPECT_EQ(scheduler_.FindTrial(1000), nullptr) << "FAILED: no restart left";
  Changes registered;
  ASSERT_TRUE(Register("a", {}, {{1000, 1}}, &registered).ok());
  ASSERT_NE(scheduler_.FindTrial(1000), nullptr) << "revived";
  EXPECT_EQ(scheduler_.FindTrial(1000)->state, TrialState::kRunning);
  EXPECT_EQ(scheduler_.FindTrial(1000)->failures, 0);
  ASSERT_EQ(registered.sweeps.size(), 1u);
  EXPECT_EQ(registered.sweeps[0].second, SweepState::kActive) << "its DONE sweep reopens";
  Changes finished;
  EXPECT_EQ(*Finish("a", 1, TrialState::kSucceeded, &finished), TrialState::kSucceeded);
  EXPECT_EQ(finished.trials.back().failures, 0);
  EXPECT_EQ(finished.trials.back().error, "");
  // Exactly once: the same Finish again (its answer lost) is refused.
  EXPECT_EQ(Finish("a", 1, TrialState::kSucceeded, &finished).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(LapseTest, AFinishBeforeTheWorkersRegisterRevivesItsAttemptToo) {
  LeaseAndExpire(/*max_restarts=*/2);
  EXPECT_EQ(StateOf(1000, TrialState::kSucceeded), TrialState::kPending);
  EXPECT_EQ(scheduler_.LapsedTrial(1000, 1, "b"), nullptr) << "only its worker may claim it";
  EXPECT_NE(scheduler_.LapsedTrial(1000, 1, "a"), nullptr);
  Changes changes;
  EXPECT_EQ(Finish("b", 1, TrialState::kSucceeded, &changes).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(*Finish("a", 1, TrialState::kSucceeded, &changes), TrialState::kSucceeded);
  EXPECT_EQ(changes.trials.back().failures, 0);
  EXPECT_EQ(changes.trials.back().attempt, 1);
}

TEST_F(LapseTest, ALapsedOutcomeNoLongerCountsOnceANewerAttemptStarted) {
  LeaseAndExpire(/*max_restarts=*/2);
  clock_.AdvanceMs(5'000);  // past the back-off
  ASSERT_EQ(Acquire("b").size(), 1u);
  Changes changes;
  ASSERT_TRUE(Register("a", {}, {{1000, 1}}, &changes).ok());
  EXPECT_EQ(scheduler_.FindTrial(1000)->attempt, 2) << "attempt 2 goes on";
  EXPECT_EQ(scheduler_.LapsedTrial(1000, 1, "a"), nullptr);
  EXPECT_EQ(Finish("a", 1, TrialState::kSucceeded, &changes).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(*Finish("b", 2, TrialState::kSucceeded, &changes), TrialState::kSucceeded);
  EXPECT_EQ(changes.trials.back().failures, 1) << "attempt 1's lapse stays charged";
}

TEST_F(LapseTest, ACancelledTrialIsNotRevived) {
  LeaseAndExpire(/*max_restarts=*/2);
  Changes changes;
  scheduler_.CancelTrial(1000, &changes);
  ASSERT_TRUE(Register("a", {}, {{1000, 1}}, &changes).ok());
  EXPECT_EQ(scheduler_.FindTrial(1000), nullptr);
  EXPECT_EQ(Finish("a", 1, TrialState::kSucceeded, &changes).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// Within the TTL: a restarted daemon registers before its spool replays the Finish. Listed as
// finished, the lease is kept (and renewed by heartbeats) instead of ending "registered again
// without it".
TEST_F(LapseTest, ARegisterListingASpooledFinishKeepsItsLease) {
  AddSweep(1, 1, 50, 1, 1, 0, /*max_restarts=*/0);
  AddWorker("a", 1);
  ASSERT_EQ(Acquire("a").size(), 1u);
  Changes changes;
  absl::StatusOr<std::vector<AttemptId>> kept = Register("a", {}, {{1000, 1}}, &changes);
  ASSERT_TRUE(kept.ok());
  EXPECT_TRUE(kept->empty()) << "finished, not running";
  EXPECT_TRUE(changes.attempts_ended.empty());
  for (int i = 0; i < 3; ++i) {
    clock_.AdvanceMs(kTtl / 2);
    HeartbeatResult beat = scheduler_.Heartbeat("a", "", {}, clock_.NowMs(), &changes, {{1000, 1}});
    EXPECT_TRUE(beat.stop.empty());
    EXPECT_EQ(scheduler_.ExpireLeases(clock_.NowMs(), &changes), 0);
  }
  EXPECT_EQ(*Finish("a", 1, TrialState::kSucceeded, &changes), TrialState::kSucceeded);
  EXPECT_EQ(changes.trials.back().failures, 0);
}

// A partitioned worker whose lease expired and that still runs the attempt gets it back at its
// next heartbeat (no newer attempt started), on its slot.
TEST_F(LapseTest, AHeartbeatListingALapsedRunningAttemptRevivesIt) {
  LeaseAndExpire(/*max_restarts=*/2);
  Changes changes;
  HeartbeatResult beat = scheduler_.Heartbeat("a", "", {{1000, 1}}, clock_.NowMs(), &changes);
  EXPECT_TRUE(beat.stop.empty()) << "revived, not stopped";
  EXPECT_EQ(StateOf(1000, TrialState::kPending), TrialState::kRunning);
  ASSERT_NE(scheduler_.FindLeases(1000), nullptr);
  EXPECT_EQ(scheduler_.FindLeases(1000)->front().slots, (std::vector<int>{0}));
  EXPECT_EQ(scheduler_.Stats(clock_.NowMs()).slots_busy, 1) << "its slot is taken again";
}

}  // namespace
}  // namespace spheret::sched
