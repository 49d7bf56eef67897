
#include "tests/server/sched_fixture.h"

namespace spheret::sched {
namespace {

TEST_F(SchedulerTest, LeasesInPriorityThenSubmitOrder) {
  AddSweep(1, 2, /*priority=*/10);
  AddSweep(2, 2, /*priority=*/90);
  AddWorker("w", 4);
  std::vector<LeaseRecord> leases = Acquire("w", 4, 3);
  ASSERT_EQ(leases.size(), 3u);
  EXPECT_EQ(leases[0].trial_id, 2000);
  EXPECT_EQ(leases[1].trial_id, 2001);
  EXPECT_EQ(leases[2].trial_id, 1000);
  EXPECT_EQ(leases[0].attempt, 1);
  EXPECT_EQ(leases[0].expires_ms, clock_.NowMs() + kTtl);
}

TEST_F(SchedulerTest, RespectsFreeSlotsAndWorkerKind) {
  AddSweep(1, 5, 50, 1, /*slots=*/2);
  AddSweep(2, 1, 90, 1, 1, /*gpus=*/1);  // GPU trials never go to a CPU worker
  AddWorker("cpu", 3);
  std::vector<LeaseRecord> leases = Acquire("cpu", 8, 8);
  ASSERT_EQ(leases.size(), 1u) << "3 slots hold one 2-slot trial";
  EXPECT_EQ(leases[0].trial_id, 1000);
  EXPECT_EQ(leases[0].slots, (std::vector<int>{0, 1}));
  EXPECT_TRUE(Acquire("cpu", 8, 8).empty());
  AddWorker("gpu", 0, {4, 7});
  leases = Acquire("gpu", 2, 4);
  ASSERT_EQ(leases.size(), 1u);
  EXPECT_EQ(leases[0].trial_id, 2000);
  EXPECT_EQ(leases[0].slots, (std::vector<int>{4})) << "GPU indices are the slots";
}

TEST_F(SchedulerTest, AgingLetsASmallSweepThroughABigOne) {
  AddSweep(1, 100, /*priority=*/60);
  clock_.AdvanceMs(1);
  AddSweep(2, 1, /*priority=*/50);
  AddWorker("w", 1);
  std::vector<int64_t> order;
  for (int i = 0; i < 15; ++i) {
    std::vector<LeaseRecord> leases = Acquire("w", 1);
    ASSERT_EQ(leases.size(), 1u);
    order.push_back(leases[0].trial_id);
    Changes changes;
    ASSERT_TRUE(scheduler_
                    .Finish({leases[0].trial_id, 1, TrialState::kSucceeded, 0, "", clock_.NowMs()},
                            "w", &changes)
                    .ok());
    clock_.AdvanceMs(60'000);  // each trial takes a minute
  }
  auto small = std::find(order.begin(), order.end(), 2000);
  ASSERT_NE(small, order.end()) << "the priority-50 sweep starved";
  // It waits while its aging (1 point per minute) makes up the 10-point gap, not longer.
  EXPECT_GE(small - order.begin(), 9);
  EXPECT_LE(small - order.begin(), 12);
}

TEST_F(SchedulerTest, ExpiredLeaseRequeuesWithBackoffThenAttemptTwo) {
  AddSweep(1, 1);
  AddWorker("a", 1);
  AddWorker("b", 1);
  ASSERT_EQ(Acquire("a").size(), 1u);
  Changes changes;
  clock_.AdvanceMs(kTtl);
  EXPECT_EQ(scheduler_.ExpireLeases(clock_.NowMs(), &changes), 0) << "not past the TTL yet";
  clock_.AdvanceMs(1);
  EXPECT_EQ(scheduler_.ExpireLeases(clock_.NowMs(), &changes), 1);
  EXPECT_EQ(StateOf(1000, TrialState::kSucceeded), TrialState::kPending);
  ASSERT_EQ(changes.attempts_ended.size(), 1u);
  EXPECT_EQ(changes.attempts_ended[0].stderr_tail, "lease expired");
  EXPECT_TRUE(Acquire("b").empty()) << "back-off of 5 s after attempt 1";
  clock_.AdvanceMs(5'000);
  std::vector<LeaseRecord> leases = Acquire("b");
  ASSERT_EQ(leases.size(), 1u);
  EXPECT_EQ(leases[0].attempt, 2);
  EXPECT_EQ(leases[0].worker_id, "b");
}

TEST_F(SchedulerTest, HeartbeatsKeepLeasesAlive) {
  AddSweep(1, 1);
  AddWorker("a", 1);
  ASSERT_EQ(Acquire("a").size(), 1u);
  for (int i = 0; i < 10; ++i) {
    clock_.AdvanceMs(5'000);
    Changes changes;
    HeartbeatResult beat = scheduler_.Heartbeat("a", "", {{1000, 1}}, clock_.NowMs(), &changes);
    EXPECT_TRUE(beat.known);
    EXPECT_TRUE(beat.stop.empty());
    EXPECT_EQ(scheduler_.ExpireLeases(clock_.NowMs(), &changes), 0);
  }
  EXPECT_EQ(StateOf(1000, TrialState::kPending), TrialState::kRunning);
}

TEST_F(SchedulerTest, FencingRefusesStaleAttempts) {
  AddSweep(1, 1);
  AddWorker("a", 1);
  AddWorker("b", 1);
  Acquire("a");
  EXPECT_TRUE(scheduler_.CheckFence(1000, 1).ok());
  Changes changes;
  clock_.AdvanceMs(kTtl + 1);
  scheduler_.ExpireLeases(clock_.NowMs(), &changes);
  EXPECT_EQ(scheduler_.CheckFence(1000, 1).code(), absl::StatusCode::kFailedPrecondition);
  clock_.AdvanceMs(5'000);
  ASSERT_EQ(Acquire("b").size(), 1u);
  EXPECT_EQ(scheduler_.CheckFence(1000, 1).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(scheduler_.CheckFence(1000, 2).ok());
  // The old holder's report and heartbeat: refused, and told to stop.
  absl::StatusOr<TrialState> late =
      scheduler_.Finish({1000, 1, TrialState::kSucceeded, 0, "", clock_.NowMs()}, "a", &changes);
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition);
  HeartbeatResult beat = scheduler_.Heartbeat("a", "", {{1000, 1}}, clock_.NowMs(), &changes);
  ASSERT_EQ(beat.stop.size(), 1u);
  EXPECT_EQ(beat.stop[0], AttemptId(1000, 1));
  // Attempt 2's worker is not fenced off, and another worker cannot finish it.
  EXPECT_EQ(
      scheduler_.Finish({1000, 2, TrialState::kSucceeded, 0, "", 0}, "a", &changes).status().code(),
      absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(*scheduler_.Finish({1000, 2, TrialState::kSucceeded, 0, "", 0}, "b", &changes),
            TrialState::kSucceeded);
}

TEST_F(SchedulerTest, FailuresRetryUpToMaxRestartsThenFail) {
  AddSweep(1, 1, 50, 1, 1, 0, /*max_restarts=*/2);
  AddWorker("a", 1);
  for (int attempt = 1; attempt <= 3; ++attempt) {
    clock_.AdvanceMs(10 * 60'000);  // past any back-off
    std::vector<LeaseRecord> leases = Acquire("a");
    ASSERT_EQ(leases.size(), 1u) << "attempt " << attempt;
    EXPECT_EQ(leases[0].attempt, attempt);
    Changes changes;
    absl::StatusOr<TrialState> state = scheduler_.Finish(
        {1000, attempt, TrialState::kFailed, 1, "boom", clock_.NowMs()}, "a", &changes);
    ASSERT_TRUE(state.ok());
    EXPECT_EQ(*state, attempt <= 2 ? TrialState::kPending : TrialState::kFailed);
    if (attempt == 3) {
      EXPECT_NE(changes.trials.back().error.find(
                    "trainer exited with code 1 (failure 3 of 3, attempt 3)"),
                std::string::npos)
          << changes.trials.back().error;
      ASSERT_EQ(changes.sweeps.size(), 1u);
      EXPECT_EQ(changes.sweeps[0].second, SweepState::kDone);
    }
  }
}

TEST_F(SchedulerTest, HandedBackTrialsAreLeasedAgainAtOnceAndNeverFail) {
  AddSweep(1, 1, 50, 1, 1, 0, /*max_restarts=*/0);
  AddWorker("a", 1);
  for (int attempt = 1; attempt <= 3; ++attempt) {
    std::vector<LeaseRecord> leases = Acquire("a");
    ASSERT_EQ(leases.size(), 1u) << "no back-off after a hand-back";
    EXPECT_EQ(leases[0].attempt, attempt);
    Changes changes;
    EXPECT_EQ(*scheduler_.Finish({1000, attempt, TrialState::kPending, 4, "", clock_.NowMs()}, "a",
                                 &changes),
              TrialState::kPending);
  }
}

// Issue 11, item 8: every lease incremented `attempt`, and max_restarts was checked against it, so
// hand-backs used up the retry budget. Failures and hand-backs now count apart.
TEST_F(SchedulerTest, RetryBudgetHandBacksDoNotCountAgainstMaxRestarts) {
  AddSweep(1, 1, 50, 1, 1, 0, /*max_restarts=*/1);
  AddWorker("a", 1);
  int attempt = 0;
  for (; attempt < 3; ++attempt) {  // three pre-emptions
    ASSERT_EQ(Acquire("a").size(), 1u);
    Changes changes;
    ASSERT_EQ(*scheduler_.Finish({1000, attempt + 1, TrialState::kPending, 4, "", clock_.NowMs()},
                                 "a", &changes),
              TrialState::kPending);
  }
  clock_.AdvanceMs(10 * 60'000);
  ASSERT_EQ(Acquire("a").size(), 1u);
  Changes first_failure;
  EXPECT_EQ(*scheduler_.Finish({1000, 4, TrialState::kFailed, 1, "boom", clock_.NowMs()}, "a",
                               &first_failure),
            TrialState::kPending)
      << "attempt 4 is the first failure: max_restarts 1 allows one retry";
  EXPECT_EQ(first_failure.trials.back().failures, 1);
  clock_.AdvanceMs(10 * 60'000);
  ASSERT_EQ(Acquire("a").size(), 1u);
  Changes second_failure;
  EXPECT_EQ(*scheduler_.Finish({1000, 5, TrialState::kFailed, 1, "boom", clock_.NowMs()}, "a",
                               &second_failure),
            TrialState::kFailed);
  EXPECT_EQ(second_failure.trials.back().error,
            "trainer exited with code 1 (failure 2 of 2, attempt 5)");
}

TEST_F(SchedulerTest, DivergedIsFinalAndNotRetried) {
  AddSweep(1, 1);
  AddWorker("a", 1);
  Acquire("a");
  Changes changes;
  EXPECT_EQ(*scheduler_.Finish({1000, 1, TrialState::kDiverged, 3, "", 0}, "a", &changes),
            TrialState::kDiverged);
  clock_.AdvanceMs(10 * 60'000);
  EXPECT_TRUE(Acquire("a").empty());
}

// Issue 28, item 9: after a stall of the coordinator longer than the TTL, the leases of workers
// alive when it began get a fresh TTL, and none is charged a failure; a worker already silent
// before it loses its lease as before, and stalls that repeat do not keep a silent one alive.
TEST_F(SchedulerTest, AStallRenewsTheLeasesOfWorkersAliveBeforeIt) {
  AddSweep(1, 2);
  AddWorker("a", 1);
  AddWorker("b", 1);
  ASSERT_EQ(Acquire("a").size(), 1u);  // trial 1000
  ASSERT_EQ(Acquire("b").size(), 1u);  // trial 1001
  Changes changes;
  for (int i = 0; i < 7; ++i) {  // "b" falls silent; "a" heartbeats
    clock_.AdvanceMs(5'000);
    scheduler_.Heartbeat("a", "", {{1000, 1}}, clock_.NowMs(), &changes);
  }
  const int64_t stall_start = clock_.NowMs();
  clock_.AdvanceMs(45'000);  // no decision for 45 s, over the 30 s TTL
  EXPECT_EQ(scheduler_.RenewAfterStall(stall_start, clock_.NowMs(), &changes), 1);
  EXPECT_EQ(scheduler_.ExpireLeases(clock_.NowMs(), &changes), 1) << "b's, silent before";
  EXPECT_EQ(StateOf(1000, TrialState::kPending), TrialState::kRunning);
  EXPECT_EQ(scheduler_.FindTrial(1000)->failures, 0);
  EXPECT_EQ(scheduler_.FindLeases(1000)->front().expires_ms, clock_.NowMs() + kTtl);
  EXPECT_EQ(scheduler_.FindTrial(1001)->failures, 1);
  // "a" never heartbeats again: the next stall finds it silent for over a TTL.
  clock_.AdvanceMs(20'000);
  const int64_t second_start = clock_.NowMs();
  clock_.AdvanceMs(20'000);
  EXPECT_EQ(scheduler_.RenewAfterStall(second_start, clock_.NowMs(), &changes), 0);
  EXPECT_EQ(scheduler_.ExpireLeases(clock_.NowMs(), &changes), 1);
  EXPECT_EQ(StateOf(1000, TrialState::kRunning), TrialState::kPending);
}

// A search with confirm trials to come stays ACTIVE when its last search trial ends (so a watch
// does not end before them); CloseIfIdle ends it when there is nothing to confirm. A trial its
// search stopped ends PRUNED whatever its worker says, unless it finished first.
TEST_F(SchedulerTest, ASearchWaitsForItsConfirmDecisionAndStoppedTrialsEndPruned) {
  SweepRecord sweep;
  sweep.sweep_id = 1;
  sweep.search.strategy = "asha";
  sweep.search.confirm_seeds = {7};
  scheduler_.AddSweep(sweep);
  for (int64_t id : {1, 2}) {
    TrialRecord trial;
    trial.trial_id = id;
    trial.sweep_id = 1;
    trial.role = "search";
    scheduler_.AddTrial(trial);
  }
  AddWorker("w", 2);
  ASSERT_EQ(Acquire("w", 2, 2).size(), 2u);
  Changes changes;
  scheduler_.Judge(2, 1, /*prune=*/true, &changes);
  EXPECT_TRUE(scheduler_.FindTrial(2)->prune_requested);
  const HeartbeatResult beat =
      scheduler_.Heartbeat("w", "", {{1, 1}, {2, 1}}, clock_.NowMs(), &changes);
  ASSERT_EQ(beat.stop.size(), 1u);
  EXPECT_EQ(beat.stop[0], (AttemptId{2, 1}));
  ASSERT_EQ(*scheduler_.Finish({2, 1, TrialState::kFailed, 1, "", clock_.NowMs()}, "w", &changes),
            TrialState::kPruned)
      << "its trainer died after the stop: PRUNED, not retried";
  changes = Changes();
  ASSERT_EQ(
      *scheduler_.Finish({1, 1, TrialState::kSucceeded, 0, "", clock_.NowMs()}, "w", &changes),
      TrialState::kSucceeded);
  EXPECT_TRUE(changes.sweeps.empty()) << "still ACTIVE: its confirm trials come next";
  EXPECT_EQ(scheduler_.FindSweep(1)->state, SweepState::kActive);
  scheduler_.CloseIfIdle(1, &changes);
  EXPECT_EQ(scheduler_.FindSweep(1)->state, SweepState::kDone);
  ASSERT_EQ(changes.sweeps.size(), 1u);
}

}  // namespace
}  // namespace spheret::sched
