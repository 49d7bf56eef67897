// The scheduler (pure, fake clock): gangs, cancellation, restore, registration and zombie leases.
#include "tests/server/sched_fixture.h"

namespace spheret::sched {
namespace {

// An evaluation job of a sweep of 2 nodes x 8 GPUs takes one GPU of one worker (one process
// scores one checkpoint), beside a job of its own; a training trial of the sweep still needs its
// whole gang.
TEST_F(SchedulerTest, AnEvaluationJobTakesOneSlotOfOneWorker) {
  AddSweep(1, 1, 50, /*nodes=*/2, /*slots=*/8, /*gpus=*/8);
  for (int64_t id : {2001, 2002}) {
    TrialRecord job;
    job.trial_id = id;
    job.sweep_id = 1;
    job.config_json = "{}";
    job.eval_of = 1000;
    job.eval_step = 500;
    scheduler_.AddTrial(job);
  }
  AddWorker("a", 0, {0, 1, 2, 3, 4, 5, 6, 7});
  std::vector<LeaseRecord> leases = Acquire("a", /*free=*/8, /*max=*/4);
  ASSERT_EQ(leases.size(), 2u) << "the 2-node trial cannot start on one worker; both jobs can";
  for (size_t i = 0; i < leases.size(); ++i) {
    EXPECT_EQ(leases[i].trial_id, 2001 + static_cast<int64_t>(i));
    EXPECT_EQ(leases[i].slots, std::vector<int>{static_cast<int>(i)});
    EXPECT_EQ(leases[i].rendezvous.nodes, 1);
    EXPECT_EQ(leases[i].rendezvous.slots_per_node, 1);
    EXPECT_EQ(leases[i].rendezvous.ranks_per_node, 1);
  }
  EXPECT_EQ(StateOf(1000, TrialState::kCancelled), TrialState::kPending);
  EXPECT_TRUE(Acquire("a", /*free=*/6).empty()) << "8 slots per node, 6 free";
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
  absl::StatusOr<CancelResult> result = scheduler_.CancelSweep(1, &changes);
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
            (std::vector<AttemptId>{{1, 1}}))
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
  absl::StatusOr<std::vector<AttemptId>> kept =
      scheduler_.Register(restarted, {{1000, 1}}, clock_.NowMs(), &changes);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(*kept, (std::vector<AttemptId>{{1000, 1}}));
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
  absl::StatusOr<std::vector<AttemptId>> twin =
      scheduler_.Register(second, {}, clock_.NowMs(), &changes);
  EXPECT_EQ(twin.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(twin.status().message().find("worker id 'host' is in use by another live daemon"),
            std::string::npos)
      << twin.status();
  EXPECT_EQ(scheduler_.Acquire("host", "second", 1, 0, 1, clock_.NowMs(), &changes).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(StateOf(1000, TrialState::kPending), TrialState::kRunning) << "the first keeps it";
  // The first goes silent past its TTL (it died): the second takes the id over, and the lease
  // the first held ends at once.
  clock_.AdvanceMs(kTtl + 1);
  ASSERT_TRUE(scheduler_.Register(second, {}, clock_.NowMs(), &changes).ok());
  EXPECT_EQ(StateOf(1000, TrialState::kRunning), TrialState::kPending);
  // Were it alive after all, the first is told to stop everything and to register again.
  HeartbeatResult beat =
      scheduler_.Heartbeat("host", "first", {{1000, 1}}, clock_.NowMs(), &changes);
  EXPECT_FALSE(beat.known);
  EXPECT_EQ(beat.stop, (std::vector<AttemptId>{{1000, 1}}));
}

}  // namespace
}  // namespace spheret::sched
