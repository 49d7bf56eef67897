// The chaos test (ctest label chaos): a sweep on three workers (20 trials at full size, 6 in the
// small seed of the default suite) while a seeded driver SIGKILLs workers and restarts them under
// the same ids (often within the lease TTL), SIGKILLs and restarts the coordinator, and SIGSTOPs a
// worker past its TTL; every trainer starts with a diag event whose numbers are not finite. It
// must end with every trial SUCCEEDED or DIVERGED as its trainer decided, each stored curve with
// every step exactly once, an intact database and no trial left RUNNING. Bounded: the chaos lasts
// ChaosSize::chaos_s seconds, the whole run at most kDeadlineS.
#include "tests/integration/chaos_fixture.h"

namespace spheret {
namespace {

using testing_util::ChaosSize;
using testing_util::ChaosTest;
using testing_util::Clock;
using testing_util::Env;
using testing_util::kDeadlineS;
using testing_util::kFull;
using testing_util::kWorkers;
using testing_util::SeedList;
using testing_util::SeedName;
namespace fs = std::filesystem;

// The grid's base config: `steps` steps (at full size, 300: about 2 s of training on one core),
// checkpointed 6 times a run.
std::string GridBase(int steps) {
  return "{scale: xs, n_layer: 2, block_size: 32, batch_size: 4, gradient_accumulation_steps: 1, "
         "max_iters: " +
         std::to_string(steps) + ", lr_decay_iters: " + std::to_string(steps) +
         ", warmup_iters: 2, eval_interval: " + std::to_string(steps / 6) +
         ", eval_iters: 1, log_interval: 1, learning_rate: 1e-3}";
}

TEST_P(ChaosTest, EveryTrialEndsAsItsTrainerDecidedWithWholeCurves) {
  const ChaosSize size = GetParam();
  const size_t trials_n = 2 * size.seeds;
  std::mt19937 rng(size.seed);
  for (const char* worker : kWorkers) Start(worker);
  const int64_t sweep = Submit("name: chaos\ndataset: tiny\nbase: " + GridBase(size.steps) +
                               "\nparameters:\n  method: {values: [pre_ln, geonorm]}\n"
                               "seeds: [" +
                               SeedList(size.seeds) + "]\nmax_restarts: 100\n");
  ASSERT_GT(sweep, 0);
  const auto terminal = [&](const std::vector<v1::Trial>& trials) {
    return trials.size() == trials_n && std::all_of(trials.begin(), trials.end(), [](auto& t) {
             return t.state() == v1::TRIAL_STATE_SUCCEEDED || t.state() == v1::TRIAL_STATE_DIVERGED;
           });
  };
  const auto start = Clock::now();
  std::string log = StrikeARunningTrial(size.chaos_s);
  ASSERT_FALSE(log.empty()) << "no trial stored a training step in " << size.chaos_s << " s";
  log += "\n";
  while (Clock::now() - start < std::chrono::seconds(size.chaos_s) && !terminal(Trials(sweep))) {
    std::this_thread::sleep_for(std::chrono::milliseconds(700 + rng() % 1'300));
    log += Strike(rng) + "\n";
  }
  const int left_s = kDeadlineS - size.chaos_s;
  ASSERT_TRUE(WaitFor(sweep, left_s, terminal))
      << "chaos steps:\n"
      << log << Log("coordinator") << Log("a") << Log("b") << Log("c");
  ExpectEndedAsTheirTrainersDecided(sweep, size.steps);
  EXPECT_EQ(QueryText("PRAGMA integrity_check"), "ok");
  EXPECT_EQ(Query("SELECT count(*) FROM trials WHERE state IN ('RUNNING', 'PENDING')"), 0);
  EXPECT_EQ(Query("SELECT count(*) FROM leases"), 0);
  // Every attempt's non-finite diag values (hidden_norm, theta, radial) were stored as NULL.
  EXPECT_GE(Query("SELECT count(*) FROM layer_values WHERE value IS NULL"), 3 * trials_n);
  EXPECT_EQ(kill(coordinator_->pid(), 0), 0) << "the coordinator is still up";
  // The faults hit running trials: some needed more than one attempt.
  const int64_t retried = Query("SELECT count(*) FROM trials WHERE attempt > 1");
  EXPECT_GE(retried, 1) << "the chaos missed every trial:\n" << log;
  std::cout << "chaos seed " << size.seed << " (" << Query("SELECT sum(attempt) FROM trials")
            << " attempts for " << trials_n << " trials, " << retried << " trials retried, "
            << Query("SELECT sum(failures) FROM trials") << " failures, done after "
            << std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - start).count()
            << " s):\n"
            << log;
}

// Small: 6 trials of 90 steps, 12 s of strikes (about as many faults per trial as at full size),
// and a TTL of 3 s (the SIGSTOP past it a shorter pause of the same kind).
INSTANTIATE_TEST_SUITE_P(Small, ChaosTest, testing::Values(ChaosSize{1, 3, 90, 12, 0, 3}),
                         SeedName);
INSTANTIATE_TEST_SUITE_P(ThreeSeeds, ChaosTest, testing::ValuesIn(kFull), SeedName);

// Issue 28, item 2: every trainer first prints a 5 MiB event line and 80 error events of 60,000
// bytes (4.8 MB, once one batch), then is the real one; a seeded driver SIGKILLs and restarts
// workers meanwhile, so their spools replay. Before, the first big batch was refused by the
// coordinator's receive limit and retried forever: the spool wedged and no Finish arrived.
class HugeLineChaosTest : public testing_util::ClusterTest,
                          public testing::WithParamInterface<ChaosSize> {
 protected:
  void SetUp() override {
    lease_ttl_s_ = GetParam().ttl_s;
    retry_backoff_s_ = "0.5";
    ClusterTest::SetUp();
    const std::string lines = (dir_ / "huge.lines").string();
    {
      std::ofstream out(lines);
      out << R"({"type":"error","message":")" << std::string(5 << 20, 'm') << "\"}\n";
      for (int i = 0; i < 80; ++i) {
        out << R"({"type":"error","message":")" << std::string(60'000, 'e') << "\"}\n";
      }
    }
    huge_lm_ = (dir_ / "huge-line-lm.sh").string();
    std::ofstream(huge_lm_) << "#!/bin/sh\ncat " << lines << "\nexec " << Env("SPHERET_LM")
                            << " \"$@\"\n";
    fs::permissions(huge_lm_, fs::perms::owner_all);
  }

  void Start(const std::string& worker) { StartWorker(worker, 1, "", huge_lm_); }

  std::string huge_lm_;
};

TEST_P(HugeLineChaosTest, TrainersPrintingHugeLinesEndSucceededWithWholeCurves) {
  const ChaosSize size = GetParam();
  const int kTrials = 2 * size.seeds, kHugeSteps = size.steps;
  std::mt19937 rng(size.seed);
  for (const char* worker : {"a", "b"}) Start(worker);
  const std::string base = testing_util::Base(kHugeSteps, kHugeSteps / 2);
  const int64_t sweep = Submit("name: huge-lines\ndataset: tiny\nbase: " + base +
                               "\nparameters:\n  method: {values: [pre_ln, geonorm]}\n"
                               "seeds: [" +
                               SeedList(size.seeds) + "]\nmax_restarts: 20\n");
  ASSERT_GT(sweep, 0);
  const auto succeeded = [&](const std::vector<v1::Trial>& trials) {
    return trials.size() == static_cast<size_t>(kTrials) && All(trials, v1::TRIAL_STATE_SUCCEEDED);
  };
  std::string log;
  for (int strike = 0; strike < size.strikes; ++strike) {  // a worker dies, items in its spool
    std::this_thread::sleep_for(std::chrono::milliseconds(1'000 + rng() % 3'000));
    const std::string worker = rng() % 2 == 0 ? "a" : "b";
    workers_[worker]->Signal(SIGKILL);
    Start(worker);
    log += "SIGKILL worker " + worker + ", restarted\n";
  }
  ASSERT_TRUE(WaitFor(sweep, 240, succeeded)) << log << Log("coordinator") << Log("a") << Log("b");
  for (const v1::Trial& trial : Trials(sweep)) ExpectCompleteCurve(trial.trial_id(), kHugeSteps);
  EXPECT_EQ(QueryText("PRAGMA integrity_check"), "ok");
  // Each attempt's 5 MiB line left a bounded error event saying so; no stored line is longer.
  EXPECT_GE(
      Query("SELECT count(*) FROM events WHERE json LIKE '%over the limit of an event line%'"),
      kTrials);
  EXPECT_LE(Query("SELECT max(length(json)) FROM events"), 65'536);
  EXPECT_GE(Query("SELECT count(*) FROM events WHERE length(json) > 60000"), 80 * kTrials);
  std::cout << "huge-line chaos seed " << size.seed << ": "
            << Query("SELECT sum(attempt) FROM trials") << " attempts for " << kTrials
            << " trials\n"
            << log;
}

// Small: 2 trials of 100 steps, one kill while their 10 MB of lines flow (the spool replays them).
INSTANTIATE_TEST_SUITE_P(Small, HugeLineChaosTest, testing::Values(ChaosSize{1, 1, 100, 0, 1, 4}),
                         SeedName);
INSTANTIATE_TEST_SUITE_P(ThreeSeeds, HugeLineChaosTest,
                         testing::Values(ChaosSize{1, 3, 200, 0, 2, 4},
                                         ChaosSize{2, 3, 200, 0, 2, 4},
                                         ChaosSize{3, 3, 200, 0, 2, 4}),
                         SeedName);

// Issue 28, item 9: the coordinator SIGSTOPped for longer than the lease TTL (4 s here), once or
// twice while trainers run, then SIGCONTed. Its pause is not its workers' fault: every trial
// ends SUCCEEDED in its first attempt with no failure charged, every curve step is stored once,
// the database is intact, and the coordinator says it noticed the stall. Bounded: at most
// kStallDeadlineS seconds a seed.
constexpr int kStallDeadlineS = 300;

class CoordinatorStallTest : public testing_util::ClusterTest,
                             public testing::WithParamInterface<ChaosSize> {
 protected:
  void SetUp() override {
    lease_ttl_s_ = GetParam().ttl_s;
    ClusterTest::SetUp();
  }

  // Waits until some trial of `sweep` is RUNNING and has trained a few steps; false when every
  // trial ended first (or at the deadline).
  bool WaitForTraining(int64_t sweep) {
    bool training = false;
    WaitFor(sweep, kStallDeadlineS, [&](const std::vector<v1::Trial>& trials) {
      training = std::any_of(trials.begin(), trials.end(), [](const v1::Trial& t) {
        return t.state() == v1::TRIAL_STATE_RUNNING && LatestStep(t) >= 5;
      });
      return training || All(trials, v1::TRIAL_STATE_SUCCEEDED);
    });
    return training;
  }

  // Stops the coordinator for `ms` (SIGSTOP, then SIGCONT), and says so for the log.
  std::string Stall(int ms) {
    coordinator_->Send(SIGSTOP);
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    coordinator_->Send(SIGCONT);
    return "SIGSTOP coordinator for " + std::to_string(ms) + " ms, then SIGCONT\n";
  }
};

TEST_P(CoordinatorStallTest, AStallLongerThanTheLeaseTtlFailsNoTrial) {
  const ChaosSize size = GetParam();
  const int kStallSteps = size.steps;
  const int64_t trials_n = 2 * size.seeds;
  std::mt19937 rng(size.seed);
  for (const char* worker : kWorkers) StartWorker(worker, 1);
  const std::string base =
      "{scale: xs, n_layer: 2, block_size: 32, batch_size: 4, "
      "gradient_accumulation_steps: 1, max_iters: " +
      std::to_string(kStallSteps) + ", lr_decay_iters: " + std::to_string(kStallSteps) +
      ", warmup_iters: 2, eval_interval: 50, eval_iters: 1, "
      "log_interval: 1, learning_rate: 1e-3}";
  const int64_t sweep = Submit("name: stall\ndataset: tiny\nbase: " + base +
                               "\nparameters:\n  method: {values: [pre_ln, geonorm]}\n"
                               "seeds: [" +
                               SeedList(size.seeds) + "]\n");
  ASSERT_GT(sweep, 0);
  std::string log;
  for (int stall = 0; stall < size.strikes && WaitForTraining(sweep); ++stall) {
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 1'000));
    log += Stall(lease_ttl_s_ * 1'000 + 2'000 + static_cast<int>(rng() % 4'000));
  }
  ASSERT_FALSE(log.empty()) << "every trial ended before the coordinator was stopped";
  const auto succeeded = [&](const std::vector<v1::Trial>& trials) {
    return static_cast<int64_t>(trials.size()) == trials_n &&
           All(trials, v1::TRIAL_STATE_SUCCEEDED);
  };
  ASSERT_TRUE(WaitFor(sweep, kStallDeadlineS, succeeded))
      << log << Log("coordinator") << Log("a") << Log("b") << Log("c");
  for (const v1::Trial& trial : Trials(sweep)) ExpectCompleteCurve(trial.trial_id(), kStallSteps);
  EXPECT_EQ(Query("SELECT sum(failures) FROM trials"), 0) << log << Log("coordinator");
  EXPECT_EQ(Query("SELECT max(attempt) FROM trials"), 1) << log << Log("coordinator");
  EXPECT_EQ(Query("SELECT count(*) FROM attempts"), trials_n);
  EXPECT_EQ(QueryText("PRAGMA integrity_check"), "ok");
  EXPECT_EQ(Query("SELECT count(*) FROM leases"), 0);
  EXPECT_NE(Log("coordinator").find("the coordinator stalled"), std::string::npos)
      << Log("coordinator");
  std::cout << "stall seed " << size.seed << ":\n" << log;
}

// Small: 2 trials of 150 steps on three workers, one stall past a TTL of 3 s.
INSTANTIATE_TEST_SUITE_P(Small, CoordinatorStallTest,
                         testing::Values(ChaosSize{1, 1, 150, 0, 1, 3}), SeedName);
INSTANTIATE_TEST_SUITE_P(ThreeSeeds, CoordinatorStallTest,
                         testing::Values(ChaosSize{1, 3, 300, 0, 2, 4},
                                         ChaosSize{2, 3, 300, 0, 2, 4},
                                         ChaosSize{3, 3, 300, 0, 2, 4}),
                         SeedName);

}  // namespace
}  // namespace spheret
