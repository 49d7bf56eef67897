// `spheret eval` in the coordinator (Coordinator::Evaluate): evaluation jobs are trials of the
// sweep, scheduled once per (trial, checkpoint step, task), leased with their work, and their
// scores are stored against the trial they score; a cancelled job's tasks are asked again, a
// request that names what does not exist is refused.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "base/clock.h"
#include "server/coordinator.h"
#include "server/store/store.h"

namespace spheret {
namespace {

class CoordinatorEvalTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("spheret_coordinator_eval_test_" + std::to_string(getpid()) + "_" +
            testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    auto store = store::OpenSqliteStore({(dir_ / "spheret.db").string()});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    metrics_ = std::make_unique<metrics::CoordinatorMetrics>("test");
    CoordinatorOptions options;
    options.housekeeping_interval_ms = 3'600'000;  // no background decisions
    auto coordinator = Coordinator::Start(store_.get(), metrics_.get(), &clock_, options);
    ASSERT_TRUE(coordinator.ok()) << coordinator.status();
    coordinator_ = std::move(*coordinator);
    ASSERT_TRUE(coordinator_
                    ->Submit("name: s\ndataset: d\nparameters: {method: {values: [pre_ln, "
                             "geonorm]}}\n",
                             "", false)
                    .ok());
    WorkerRecord worker;
    worker.worker_id = "w1";
    worker.cpu_slots = 1;
    ASSERT_TRUE(coordinator_->Register(worker, {}).ok());
  }
  void TearDown() override {
    coordinator_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  // Leases the next trial and returns its lease.
  Lease Next() {
    absl::StatusOr<std::vector<Lease>> grants = coordinator_->Acquire("w1", "", 1, 0, 1);
    EXPECT_TRUE(grants.ok()) << grants.status();
    EXPECT_EQ(grants->size(), 1u);
    return grants->empty() ? Lease{} : grants->front();
  }
  // Ends a leased attempt with `outcome`, after a batch with a checkpoint at `step` (if > 0) and
  // zero-shot scores (task, value) at `eval_step`.
  void End(const Lease& lease, TrialState outcome, int64_t step,
           const std::vector<std::pair<std::string, double>>& scores = {}, int64_t eval_step = 0) {
    EventBatchRecord batch{
        lease.record.trial_id, lease.record.attempt, {}, {}, step, "ckpt.pt", {}, {}};
    for (const auto& [task, value] : scores)
      batch.evals.push_back({task, "acc", value, 0.01, eval_step});
    ASSERT_TRUE(coordinator_->Ingest(batch, "w1").ok());
    AttemptEnd end;
    end.trial_id = lease.record.trial_id;
    end.attempt = lease.record.attempt;
    end.outcome = outcome;
    ASSERT_TRUE(coordinator_->Finish(end, "w1").ok());
  }
  EvalRequest Request(std::vector<std::string> tasks) {
    EvalRequest request;
    request.sweep_id = 1;
    request.tasks = std::move(tasks);
    request.data = "zs";
    return request;
  }
  int64_t TrialCount() { return store_->ListTrials({1, {}, 0, 1000})->size(); }

  std::filesystem::path dir_;
  FakeClock clock_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<metrics::CoordinatorMetrics> metrics_;
  std::unique_ptr<Coordinator> coordinator_;
};

TEST_F(CoordinatorEvalTest, OneJobPerCheckpointAndTaskItsScoresStoredAgainstItsTrial) {
  End(Next(), TrialState::kSucceeded, 100);
  End(Next(), TrialState::kSucceeded, 100);
  ASSERT_EQ(store_->GetSweep(1)->state, SweepState::kDone);
  EvalRequest request = Request({"piqa", "boolq", "piqa"});
  request.where = {{"method", "geonorm"}};
  absl::StatusOr<std::vector<EvalPlan>> plans = coordinator_->Evaluate(request);
  ASSERT_TRUE(plans.ok()) << plans.status();
  ASSERT_EQ(plans->size(), 1u);
  EXPECT_EQ((*plans)[0].trial_id, 2);
  EXPECT_EQ((*plans)[0].step, 100);
  EXPECT_EQ((*plans)[0].tasks, (std::vector<std::string>{"piqa", "boolq"}));
  EXPECT_EQ((*plans)[0].job_id, 3);
  EXPECT_EQ(store_->GetSweep(1)->state, SweepState::kActive) << "a job reopens its sweep";
  plans = coordinator_->Evaluate(request);  // the same again: nothing new
  EXPECT_TRUE((*plans)[0].tasks.empty());
  EXPECT_EQ((*plans)[0].note, "being scored by job 3");
  EXPECT_EQ(TrialCount(), 3);

  const Lease job = Next();
  EXPECT_EQ(job.record.trial_id, 3);
  EXPECT_EQ(job.eval.trial_id, 2);
  EXPECT_EQ(job.eval.step, 100);
  EXPECT_EQ(job.eval.tasks, (std::vector<std::string>{"piqa", "boolq"}));
  EXPECT_EQ(job.eval.data, "zs");
  End(job, TrialState::kSucceeded, 0, {{"piqa", 0.625}, {"boolq", 0.5}}, 100);
  EXPECT_EQ(store_->Evals(2)->size(), 2u) << "scores belong to the trial scored";
  EXPECT_TRUE(store_->Evals(3)->empty());
  EXPECT_EQ(store_->GetSweep(1)->state, SweepState::kDone);

  plans = coordinator_->Evaluate(request);
  EXPECT_EQ((*plans)[0].note, "already scored at step 100");
  plans = coordinator_->Evaluate(Request({"piqa", "arc_easy"}));  // both trials, one new task
  ASSERT_EQ(plans->size(), 2u) << "jobs are not trials to evaluate";
  EXPECT_EQ((*plans)[0].tasks, (std::vector<std::string>{"piqa", "arc_easy"}));
  EXPECT_EQ((*plans)[1].tasks, (std::vector<std::string>{"arc_easy"}));
  EXPECT_EQ(TrialCount(), 5);

  store::TrialQuery query{1, {}, 0, 100};
  absl::StatusOr<std::vector<TrialResult>> results = coordinator_->ListResults(query);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), 2u) << "results show trials, not their jobs";
  EXPECT_EQ((*results)[1].evals.size(), 2u);
}

TEST_F(CoordinatorEvalTest, ACancelledJobsTasksAreAskedAgainAndBadRequestsAreRefused) {
  End(Next(), TrialState::kSucceeded, 40);
  ASSERT_TRUE(coordinator_->CancelTrial(2).ok());
  EvalRequest dry = Request({"piqa"});
  dry.dry_run = true;
  absl::StatusOr<std::vector<EvalPlan>> plans = coordinator_->Evaluate(dry);
  ASSERT_TRUE(plans.ok()) << plans.status();
  ASSERT_EQ(plans->size(), 2u);
  EXPECT_EQ((*plans)[0].tasks, std::vector<std::string>{"piqa"});
  EXPECT_EQ((*plans)[0].job_id, 0);
  EXPECT_EQ((*plans)[1].note, "is CANCELLED (only SUCCEEDED trials are evaluated)");
  EXPECT_EQ(TrialCount(), 2) << "a dry run stores nothing";

  plans = coordinator_->Evaluate(Request({"piqa"}));
  ASSERT_EQ((*plans)[0].job_id, 3);
  ASSERT_TRUE(coordinator_->CancelTrial(3).ok());
  plans = coordinator_->Evaluate(Request({"piqa"}));
  EXPECT_EQ((*plans)[0].job_id, 4) << "a cancelled job's task is asked again";

  const auto refused = [&](EvalRequest request, const std::string& says) {
    const absl::Status status = coordinator_->Evaluate(request).status();
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
    EXPECT_NE(status.message().find(says), std::string::npos) << status;
  };
  refused(Request({"piqa", "nosuchtask"}), "unknown task 'nosuchtask'");
  EvalRequest no_data = Request({"piqa"});
  no_data.data = "";
  refused(no_data, "no data folder");
  EvalRequest knob = Request({"piqa"});
  knob.where = {{"scal", "L"}};
  refused(knob, "no trial of sweep 1 sets 'scal'");
  EvalRequest stranger = Request({"piqa"});
  stranger.trial_ids = {99};
  refused(stranger, "trial 99 is not a trial of sweep 1");
  EvalRequest job = Request({"piqa"});
  job.trial_ids = {3};
  refused(job, "trial 3 is an evaluation job (of trial 1)");
  EvalRequest unknown = Request({"piqa"});
  unknown.sweep_id = 7;
  EXPECT_TRUE(absl::IsNotFound(coordinator_->Evaluate(unknown).status()));
}

}  // namespace
}  // namespace spheret
