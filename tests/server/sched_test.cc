#include <gtest/gtest.h>

#include "common/clock.h"
#include "server/sched/scheduler.h"

namespace spheret::sched {
namespace {

constexpr int64_t kTtl = 30'000;

class SchedulerTest : public testing::Test {
 protected:
  SchedulerTest() : scheduler_(Options()) {}
  static SchedulerOptions Options() {
    SchedulerOptions options;
    options.lease_ttl_ms = kTtl;
    options.aging_ms_per_point = 60'000;
    options.backoff_base_ms = 5'000;
    options.backoff_max_ms = 60'000;
    return options;
  }

  // A sweep of `count` trials with ids first_trial.. and the given shape.
  void AddSweep(int64_t sweep_id, int count, int priority = 50, int nodes = 1, int slots = 1,
                int gpus = 0, int max_restarts = 2, int64_t first_trial = 0) {
    SweepRecord sweep;
    sweep.sweep_id = sweep_id;
    sweep.name = "s" + std::to_string(sweep_id);
    sweep.priority = priority;
    sweep.nodes = nodes;
    sweep.slots_per_node = slots;
    sweep.gpus = gpus;
    sweep.max_restarts = max_restarts;
    sweep.submitted_ms = clock_.NowMs();
    scheduler_.AddSweep(sweep);
    if (first_trial == 0) first_trial = sweep_id * 1000;
    for (int i = 0; i < count; ++i) {
      TrialRecord trial;
      trial.trial_id = first_trial + i;
      trial.sweep_id = sweep_id;
      trial.config_json = "{}";
      trial.priority = priority;
      scheduler_.AddTrial(trial);
    }
  }

  void AddWorker(const std::string& id, int cpu_slots, std::vector<int> gpus = {}) {
    WorkerRecord worker;
    worker.worker_id = id;
    worker.host = id + ".local";
    worker.cpu_slots = cpu_slots;
    worker.gpus = std::move(gpus);
    Changes changes;
    ASSERT_TRUE(scheduler_.Register(worker, {}, clock_.NowMs(), &changes).ok());
  }

  std::vector<LeaseRecord> Acquire(const std::string& worker, int free = 8, int max = 1) {
    Changes changes;
    absl::StatusOr<std::vector<LeaseRecord>> leases =
        scheduler_.Acquire(worker, "", free, 29500, max, clock_.NowMs(), &changes);
    EXPECT_TRUE(leases.ok()) << leases.status();
    return leases.ok() ? *leases : std::vector<LeaseRecord>{};
  }

  TrialState StateOf(int64_t trial_id, TrialState if_gone) const {
    const TrialRecord* trial = scheduler_.FindTrial(trial_id);
    return trial == nullptr ? if_gone : trial->state;
  }

  FakeClock clock_;
  Scheduler scheduler_;
};

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
  EXPECT_EQ(beat.stop[0], RunningTrial(1000, 1));
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
      EXPECT_NE(changes.trials.back().error.find("trainer exited with code 1 (failure 3 of 3, attempt 3)"),
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
  EXPECT_EQ(second_failure.trials.back().error, "trainer exited with code 1 (failure 2 of 2, attempt 5)");
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

TEST_F(SchedulerTest, GangGetsAllNodesOrNothingWithConsistentRendezvous) {
  AddSweep(1, 1, 50, /*nodes=*/2, /*slots=*/1);
  AddWorker("a", 1);
  EXPECT_TRUE(Acquire("a").empty()) << "one worker cannot hold a 2-node gang";
  AddWorker("b", 1);
  std::vector<LeaseRecord> rank0 = Acquire("a");
  ASSERT_EQ(rank0.size(), 1u);
  std::vector<LeaseRecord> rank1 = Acquire("b");
  ASSERT_EQ(rank1.size(), 1u) << "the member receives its part on its Acquire";
  EXPECT_EQ(rank0[0].trial_id, rank1[0].trial_id);
  EXPECT_EQ(rank0[0].attempt, rank1[0].attempt);
  EXPECT_EQ(rank0[0].node_rank, 0);
  EXPECT_EQ(rank1[0].node_rank, 1);
  for (const LeaseRecord* lease : {&rank0[0], &rank1[0]}) {
    EXPECT_EQ(lease->rendezvous.master_addr, "a.local");
    EXPECT_EQ(lease->rendezvous.master_port, 29500);
    EXPECT_EQ(lease->rendezvous.nodes, 2);
    EXPECT_EQ(lease->rendezvous.slots_per_node, 1);
  }
  // One member going silent ends the whole attempt, and the other is told to stop.
  Changes changes;
  for (int i = 0; i < 7; ++i) {
    clock_.AdvanceMs(5'000);
    scheduler_.Heartbeat("a", "", {{1000, 1}}, clock_.NowMs(), &changes);
  }
  EXPECT_EQ(scheduler_.ExpireLeases(clock_.NowMs(), &changes), 1);
  HeartbeatResult beat = scheduler_.Heartbeat("a", "", {{1000, 1}}, clock_.NowMs(), &changes);
  EXPECT_EQ(beat.stop.size(), 1u);
}

TEST_F(SchedulerTest, CancellationStopsRunningTrialsOnTheirNextHeartbeat) {
  AddSweep(1, 3);
  AddWorker("a", 1);
  Acquire("a");
  Changes changes;
  absl::StatusOr<CancelResult> result = scheduler_.CancelSweep(1, clock_.NowMs(), &changes);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->cancelled_pending, 2);
  EXPECT_EQ(result->stopping_running, 1);
  EXPECT_EQ(StateOf(1001, TrialState::kCancelled), TrialState::kCancelled);
  HeartbeatResult beat = scheduler_.Heartbeat("a", "", {{1000, 1}}, clock_.NowMs(), &changes);
  ASSERT_EQ(beat.stop.size(), 1u);
  EXPECT_EQ(*scheduler_.Finish({1000, 1, TrialState::kFailed, -15, "", 0}, "a", &changes),
            TrialState::kCancelled)
      << "a cancelled trial ends CANCELLED whatever the exit";
  EXPECT_TRUE(Acquire("a").empty());
}

TEST_F(SchedulerTest, RestoreExtendsLeasesByTheDowntimeAndRequeuesOrphans) {
  SweepRecord sweep;
  sweep.sweep_id = 1;
  sweep.submitted_ms = clock_.NowMs();
  scheduler_.AddSweep(sweep);
  TrialRecord leased, orphan;
  leased.trial_id = 1;
  orphan.trial_id = 2;
  leased.sweep_id = orphan.sweep_id = 1;
  leased.state = orphan.state = TrialState::kRunning;
  leased.attempt = orphan.attempt = 1;
  scheduler_.AddTrial(leased);
  scheduler_.AddTrial(orphan);
  WorkerRecord worker;
  worker.worker_id = "a";
  worker.cpu_slots = 2;
  scheduler_.RestoreWorker(worker);
  LeaseRecord lease;
  lease.trial_id = 1;
  lease.attempt = 1;
  lease.worker_id = "a";
  lease.slots = {0};
  lease.expires_ms = clock_.NowMs() + 1'000;
  scheduler_.RestoreLease(lease);
  clock_.AdvanceMs(120'000);  // the coordinator was down for two minutes
  Changes changes;
  scheduler_.FinishRestore(120'000, clock_.NowMs(), &changes);
  EXPECT_EQ(scheduler_.ExpireLeases(clock_.NowMs(), &changes), 0);
  // Due 1 s after the crash, pushed by the 2 min downtime, and at least one TTL from the restart.
  EXPECT_EQ(scheduler_.FindLeases(1)->front().expires_ms, clock_.NowMs() + kTtl);
  EXPECT_EQ(scheduler_.FindTrial(2)->state, TrialState::kPending);
  EXPECT_EQ(scheduler_.Register(worker, {{1, 1}}, clock_.NowMs(), &changes).value(),
            (std::vector<RunningTrial>{{1, 1}}))
      << "the worker reattaches its running trial";
}

TEST_F(SchedulerTest, UnknownWorkersAreToldToRegister) {
  Changes changes;
  EXPECT_FALSE(scheduler_.Heartbeat("ghost", "", {}, clock_.NowMs(), &changes).known);
  EXPECT_EQ(scheduler_.Acquire("ghost", "", 1, 0, 1, clock_.NowMs(), &changes).status().code(),
            absl::StatusCode::kNotFound);
}

// Issue 11, item 4: heartbeats renewed every lease of a worker id, including trials the worker no
// longer ran (its daemon restarted under the same id, an Acquire reply was lost), which then stayed
// RUNNING forever. Only the running set is renewed now; the rest expires within the TTL.
TEST_F(SchedulerTest, ZombieLeasesHeartbeatsRenewOnlyTheRunningSet) {
  AddSweep(1, 1);
  AddWorker("a", 1);
  ASSERT_EQ(Acquire("a").size(), 1u);  // the reply is lost: the worker never runs it
  Changes changes;
  int expired = 0;
  for (int i = 0; i < 8; ++i) {
    clock_.AdvanceMs(5'000);
    HeartbeatResult beat = scheduler_.Heartbeat("a", "", {}, clock_.NowMs(), &changes);
    EXPECT_TRUE(beat.known);
    expired += scheduler_.ExpireLeases(clock_.NowMs(), &changes);
  }
  EXPECT_EQ(expired, 1);
  EXPECT_EQ(StateOf(1000, TrialState::kRunning), TrialState::kPending);
  EXPECT_EQ(scheduler_.FindTrial(1000)->failures, 1);
}

TEST_F(SchedulerTest, ZombieLeasesRegisterReconcilesWithTheRunningSet) {
  AddSweep(1, 2);
  AddWorker("a", 2);
  ASSERT_EQ(Acquire("a", 2, 2).size(), 2u);
  // The daemon restarts under the same id; it still runs trial 1000 (say, reattached), not 1001.
  WorkerRecord restarted;
  restarted.worker_id = "a";
  restarted.cpu_slots = 2;
  Changes changes;
  absl::StatusOr<std::vector<RunningTrial>> kept =
      scheduler_.Register(restarted, {{1000, 1}}, clock_.NowMs(), &changes);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(*kept, (std::vector<RunningTrial>{{1000, 1}}));
  EXPECT_EQ(StateOf(1000, TrialState::kPending), TrialState::kRunning);
  EXPECT_EQ(StateOf(1001, TrialState::kRunning), TrialState::kPending) << "ended at once";
  ASSERT_EQ(changes.attempts_ended.size(), 1u);
  EXPECT_EQ(changes.attempts_ended[0].stderr_tail,
            "lease lost: worker a registered again without it");
  EXPECT_EQ(scheduler_.Stats(clock_.NowMs()).slots_busy, 1) << "its slot is free again";
}

TEST_F(SchedulerTest, ZombieLeasesTwoLiveDaemonsWithOneIdAreRefused) {
  AddSweep(1, 1);
  WorkerRecord first;
  first.worker_id = "host";
  first.cpu_slots = 1;
  first.instance = "first";
  WorkerRecord second = first;
  second.instance = "second";
  Changes changes;
  ASSERT_TRUE(scheduler_.Register(first, {}, clock_.NowMs(), &changes).ok());
  ASSERT_EQ(scheduler_.Acquire("host", "first", 1, 0, 1, clock_.NowMs(), &changes)->size(), 1u);
  clock_.AdvanceMs(5'000);
  absl::StatusOr<std::vector<RunningTrial>> twin =
      scheduler_.Register(second, {}, clock_.NowMs(), &changes);
  EXPECT_EQ(twin.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(twin.status().message().find("worker id 'host' is in use by another live daemon"),
            std::string::npos)
      << twin.status();
  EXPECT_EQ(scheduler_.Acquire("host", "second", 1, 0, 1, clock_.NowMs(), &changes)
                .status()
                .code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(StateOf(1000, TrialState::kPending), TrialState::kRunning) << "the first keeps it";
  // The first goes silent past its TTL (it died): the second takes the id over, and the lease
  // the first held ends at once.
  clock_.AdvanceMs(kTtl + 1);
  ASSERT_TRUE(scheduler_.Register(second, {}, clock_.NowMs(), &changes).ok());
  EXPECT_EQ(StateOf(1000, TrialState::kRunning), TrialState::kPending);
  // Were it alive after all, the first is told to stop everything and to register again.
  HeartbeatResult beat = scheduler_.Heartbeat("host", "first", {{1000, 1}}, clock_.NowMs(), &changes);
  EXPECT_FALSE(beat.known);
  EXPECT_EQ(beat.stop, (std::vector<RunningTrial>{{1000, 1}}));
}

}  // namespace
}  // namespace spheret::sched
