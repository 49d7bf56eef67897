// ASHA searches in the coordinator: a search trial's metric is judged at its rungs as it is
// ingested (stored with the verdict), a losing trial is told to stop and ends PRUNED, a pruned
// trial resumes by hand and is not stopped again, a group that has ended gets its confirm trials
// once (also after a restart), and the verdicts survive a restart.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "base/clock.h"
#include "config/trial_config.h"
#include "server/coordinator.h"
#include "server/store/store.h"

namespace spheret {
namespace {

// 4 learning rates per method; rungs at 10 and 30 below max_iters 50 (eta 3).
constexpr char kSearch[] = R"(name: s
dataset: d
base: {max_iters: 50, eval_interval: 10}
parameters:
  method: {values: [pre_ln, geonorm]}
  learning_rate: {values: [1e-3, 2e-3, 3e-3, 4e-3]}
search: {strategy: asha, min_iters: 10, reduction_factor: 3, group_by: [method],
         confirm: {seeds: [7, 8], top: 1}}
)";

class CoordinatorSearchTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("spheret_coordinator_search_test_" + std::to_string(getpid()) + "_" +
            testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    Open();
    absl::StatusOr<SubmitResult> submitted = coordinator_->Submit(kSearch, "", false);
    ASSERT_TRUE(submitted.ok()) << submitted.status();
    ASSERT_EQ(submitted->created_trials, 8);
    WorkerRecord worker;
    worker.worker_id = "w1";
    worker.cpu_slots = 8;
    ASSERT_TRUE(coordinator_->Register(worker, {}).ok());
    absl::StatusOr<std::vector<Lease>> grants = coordinator_->Acquire("w1", "", 8, 0, 8);
    ASSERT_TRUE(grants.ok()) << grants.status();
    ASSERT_EQ(grants->size(), 8u);
    for (const Lease& lease : *grants) attempt_[lease.record.trial_id] = lease.record.attempt;
  }
  void TearDown() override {
    coordinator_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  void Open() {
    coordinator_.reset();
    store_.reset();
    auto store = store::OpenSqliteStore({(dir_ / "spheret.db").string()});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    metrics_ = std::make_unique<metrics::CoordinatorMetrics>("test");
    CoordinatorOptions options;
    options.housekeeping_interval_ms = 3'600'000;  // no background decisions
    auto coordinator = Coordinator::Start(store_.get(), metrics_.get(), &clock_, options);
    ASSERT_TRUE(coordinator.ok()) << coordinator.status();
    coordinator_ = std::move(*coordinator);
  }
  // Trial `id` reports val/loss `value` at `step`.
  void Report(int64_t id, int64_t step, double value) {
    EventBatchRecord batch{id, attempt_[id], {{"val/loss", step, value, 0}}, {}, 0, "", {}, {}};
    absl::StatusOr<int64_t> stored = coordinator_->Ingest(batch, "w1");
    ASSERT_TRUE(stored.ok()) << stored.status();
  }
  void End(int64_t id, TrialState outcome) {
    AttemptEnd end{id, attempt_[id], outcome, 0, "", 0};
    ASSERT_TRUE(coordinator_->Finish(end, "w1").ok());
  }
  TrialRecord Trial(int64_t id) { return **store_->GetTrial(id); }
  std::vector<sched::AttemptId> Stopped() {
    std::vector<sched::AttemptId> running;
    for (const auto& [id, attempt] : attempt_) {
      if (Trial(id).state == TrialState::kRunning) running.emplace_back(id, attempt);
    }
    return coordinator_->Heartbeat("w1", "", running)->stop;
  }

  std::filesystem::path dir_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<metrics::CoordinatorMetrics> metrics_;
  FakeClock clock_{1'000'000};
  std::unique_ptr<Coordinator> coordinator_;
  std::map<int64_t, int> attempt_;
};

TEST_F(CoordinatorSearchTest, LosersAreStoppedAtTheirRungAndEndPruned) {
  // pre_ln is trials 1-4, geonorm 5-8 (grid order); groups are judged apart.
  Report(1, 10, 3.0);  // first at rung 0: the best of 1, continues
  Report(2, 10, 3.5);  // worse than 3.0 with 2 values (keep 1): stopped
  Report(5, 10, 9.0);  // another group: the best of its 1, continues
  EXPECT_EQ(Trial(1).rung, 1);
  EXPECT_FALSE(Trial(1).prune_requested);
  EXPECT_TRUE(Trial(2).prune_requested);
  EXPECT_FALSE(Trial(5).prune_requested);
  const std::vector<sched::AttemptId> stop = Stopped();
  ASSERT_EQ(stop.size(), 1u);
  EXPECT_EQ(stop[0].first, 2);
  // The worker stops it (CANCELLED from the worker's side): PRUNED, not retried, not a failure.
  End(2, TrialState::kCancelled);
  EXPECT_EQ(Trial(2).state, TrialState::kPruned);
  EXPECT_EQ(Trial(2).failures, 0);
  // The same batch again (its answer lost) judges nothing twice.
  Report(1, 10, 3.0);
  const std::vector<RungValue> values = *store_->RungValues(1);
  ASSERT_EQ(values.size(), 3u);
  EXPECT_EQ(values[0].search_group, R"({"method":"geonorm"})");
  EXPECT_EQ(values[1].trial_id, 1);
  EXPECT_TRUE(values[1].promoted);
  EXPECT_EQ(values[2].trial_id, 2);
  EXPECT_FALSE(values[2].promoted);
  // A report past several rungs is judged at each: 30 is rung 1 too.
  Report(3, 30, 2.0);
  EXPECT_EQ(Trial(3).rung, 2);
  EXPECT_FALSE(Trial(3).prune_requested);
}

TEST_F(CoordinatorSearchTest, ASampledSweepSubmittedAgainAddsNoTrial) {
  const std::string sampled = R"(name: drawn
dataset: d
base: {max_iters: 50, eval_interval: 10}
parameters:
  method: {values: [pre_ln, geonorm]}
  learning_rate: {distribution: loguniform, min: 1e-4, max: 3e-2}
search: {strategy: asha, samples: 6, min_iters: 10, group_by: [method]}
)";
  absl::StatusOr<SubmitResult> first = coordinator_->Submit(sampled, "", false);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->created_trials, 12);
  absl::StatusOr<SubmitResult> again = coordinator_->Submit(sampled, "", false);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->created_trials, 0) << "the same file draws the same trials";
  EXPECT_EQ(again->trial_count, 12);
  Open();  // and so does a restarted coordinator
  absl::StatusOr<SubmitResult> later = coordinator_->Submit(sampled, "", false);
  ASSERT_TRUE(later.ok()) << later.status();
  EXPECT_EQ(later->created_trials, 0);
}

TEST_F(CoordinatorSearchTest, VerdictsSurviveARestart) {
  Report(1, 10, 3.0);
  Report(2, 10, 2.0);  // better: continues; rung 0 holds 3.0 and 2.0
  Open();              // the coordinator restarts: boards come back from the store
  Report(3, 10, 2.5);  // 3 values, keep 1: 2.5 > 2.0, stopped
  EXPECT_TRUE(Trial(3).prune_requested);
  Report(4, 10, 1.0);  // the best: continues
  EXPECT_FALSE(Trial(4).prune_requested);
}

TEST_F(CoordinatorSearchTest, APrunedTrialResumesByHandAndIsNotStoppedAgain) {
  Report(1, 10, 3.0);
  Report(2, 10, 3.5);
  End(2, TrialState::kCancelled);
  ASSERT_EQ(Trial(2).state, TrialState::kPruned);
  EXPECT_FALSE(coordinator_->Resume(1).ok()) << "only a PRUNED trial resumes";
  absl::StatusOr<TrialRecord> resumed = coordinator_->Resume(2);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(Trial(2).state, TrialState::kPending);
  EXPECT_TRUE(Trial(2).prune_exempt);
  absl::StatusOr<std::vector<Lease>> again = coordinator_->Acquire("w1", "", 1, 0, 1);
  ASSERT_TRUE(again.ok() && again->size() == 1u);
  EXPECT_EQ(again->front().record.trial_id, 2);
  attempt_[2] = again->front().record.attempt;
  Report(2, 30, 99.0);  // would lose at rung 1; it is exempt
  EXPECT_FALSE(Trial(2).prune_requested);
}

TEST_F(CoordinatorSearchTest, AnEndedGroupGetsItsConfirmTrialsOnce) {
  // pre_ln: trial 1 is the best; the others are pruned or end.
  Report(1, 10, 3.0);
  Report(2, 10, 3.5);
  End(2, TrialState::kCancelled);
  Report(1, 30, 2.5);
  Report(1, 50, 2.0);
  End(1, TrialState::kSucceeded);
  Report(3, 10, 2.9);
  Report(3, 30, 2.6);
  Report(3, 50, 2.1);
  End(3, TrialState::kSucceeded);
  EXPECT_EQ(store_->ListTrials({1, {}, 0, 1000})->size(), 8u) << "trial 4 still runs";
  Report(4, 10, 4.0);
  End(4, TrialState::kCancelled);  // stopped by its rung: the group has ended
  std::vector<TrialRecord> trials = *store_->ListTrials({1, {}, 0, 1000});
  ASSERT_EQ(trials.size(), 10u) << "pre_ln's best setting once per confirm seed";
  for (size_t i = 8; i < 10; ++i) {
    EXPECT_EQ(trials[i].role, "confirm");
    EXPECT_EQ(trials[i].search_group, R"({"method":"pre_ln"})");
    const TrialConfig config(trials[i].config_json);
    EXPECT_EQ(config.KnobText("learning_rate"), "0.001") << "trial 1's setting (2.0 < 2.1)";
    EXPECT_EQ(config.KnobText("seed"), i == 8 ? "7" : "8");
  }
  coordinator_->ConfirmDue();
  Open();  // a restart checks every sweep again
  coordinator_->ConfirmDue();
  EXPECT_EQ(store_->ListTrials({1, {}, 0, 1000})->size(), 10u) << "added once";
}

TEST_F(CoordinatorSearchTest, ASweepEndsWhenItsConfirmTrialsEnd) {
  // Every trial ends; pre_ln has a SUCCEEDED trial to confirm, geonorm none.
  for (int64_t id = 1; id <= 8; ++id) {
    Report(id, 10, id == 1 ? 1.0 : 2.0 + static_cast<double>(id));
    End(id, id == 1 ? TrialState::kSucceeded : TrialState::kCancelled);
  }
  // The sweep is ACTIVE with pre_ln's confirm trials (that it never showed DONE in between is
  // SchedulerTest.ASearchWaitsForItsConfirmDecisionAndStoppedTrialsEndPruned's).
  EXPECT_EQ(store_->GetSweep(1)->state, SweepState::kActive);
  std::vector<TrialRecord> trials = *store_->ListTrials({1, {}, 0, 1000});
  ASSERT_EQ(trials.size(), 10u);
  for (int64_t id : {9, 10}) {
    attempt_[id] = 1;
    ASSERT_TRUE(coordinator_->Acquire("w1", "", 1, 0, 1).ok());
  }
  End(9, TrialState::kSucceeded);
  End(10, TrialState::kSucceeded);
  EXPECT_EQ(store_->GetSweep(1)->state, SweepState::kDone) << "its confirm trials ended";
}

TEST_F(CoordinatorSearchTest, ASearchWithNothingToConfirmEnds) {
  for (int64_t id = 1; id <= 8; ++id) {
    Report(id, 10, 2.0 + static_cast<double>(id));
    End(id, TrialState::kCancelled);  // pruned, or cancelled by hand: none SUCCEEDED
  }
  EXPECT_EQ(store_->ListTrials({1, {}, 0, 1000})->size(), 8u) << "nothing to confirm";
  EXPECT_EQ(store_->GetSweep(1)->state, SweepState::kDone);
}

}  // namespace
}  // namespace spheret
