// The worker daemon with real processes on loopback: spheret-coordinator, spheret-worker(s) with
// CPU slots and real spheret-lm runs at preset xs on a tiny data set. Every test is bounded in
// time.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <thread>

#include "server/store/sqlite_db.h"
#include "spheret/v1/sweeps.grpc.pb.h"
#include "tests/integration/child_process.h"
#include "tests/server/metrics_check.h"

namespace spheret {
namespace {

namespace fs = std::filesystem;
using testing_util::ChildProcess;
using Clock = std::chrono::steady_clock;

// A binary's path: the environment variable when set, else the one built beside this test.
std::string Env(const char* name) {
  if (const char* value = std::getenv(name); value != nullptr) return value;
  const std::string key = name;
  if (key == "SPHERET_COORDINATOR") return SPHERET_COORDINATOR_PATH;
  if (key == "SPHERET_WORKER") return SPHERET_WORKER_PATH;
  return SPHERET_LM_PATH;
}

// Config knobs of a short run on the tiny data set.
std::string Base(int max_iters, int eval_interval) {
  return "{scale: xs, block_size: 32, batch_size: 4, gradient_accumulation_steps: 1, max_iters: " +
         std::to_string(max_iters) +
         ", warmup_iters: 2, lr_decay_iters: " + std::to_string(max_iters) +
         ", eval_interval: " + std::to_string(eval_interval) +
         ", eval_iters: 2, log_interval: 1, learning_rate: 1e-3}";
}

class WorkerTest : public testing::Test {
 protected:
  static constexpr int kLeaseTtlS = 4;

  void SetUp() override {
    dir_ =
        fs::temp_directory_path() / ("spheret_worker_test_" + std::to_string(getpid()) + "_" +
                                     testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "text");
    {
      std::ofstream text(dir_ / "text" / "a.txt");
      for (int i = 1; i <= 400; ++i) text << "line " << i << ": the quick brown fox jumps\n";
    }
    ChildProcess prepare({Env("SPHERET_LM"), "prepare", "--input", (dir_ / "text").string(),
                          "--out", (dir_ / "data" / "tiny").string()},
                         (dir_ / "prepare.out").string(), (dir_ / "prepare.err").string());
    ASSERT_EQ(prepare.Wait(), 0);
    StartCoordinator("127.0.0.1:0");
  }

  void TearDown() override {
    workers_.clear();
    coordinator_.reset();
    if (!HasFailure()) fs::remove_all(dir_);
  }

  void StartCoordinator(const std::string& listen) {
    coordinator_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{Env("SPHERET_COORDINATOR"), "--db", (dir_ / "spheret.db").string(),
                                 "--listen", listen, "--metrics-listen", "", "--lease-ttl",
                                 std::to_string(kLeaseTtlS)},
        (dir_ / ("coordinator-" + std::to_string(++coordinator_starts_) + ".out")).string(),
        (dir_ / "coordinator.err").string());
    const std::string line = coordinator_->FirstLine();
    ASSERT_EQ(std::sscanf(line.c_str(), "listening %d", &port_), 1) << "coordinator: " << line;
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(port_),
                                   grpc::InsecureChannelCredentials());
    sweeps_ = v1::SweepService::NewStub(channel_);
  }

  ChildProcess& StartWorker(const std::string& name, int slots,
                            const std::string& metrics_listen = "") {
    workers_[name] = std::make_unique<ChildProcess>(
        std::vector<std::string>{
            Env("SPHERET_WORKER"), "--coordinator", "127.0.0.1:" + std::to_string(port_), "--slots",
            std::to_string(slots), "--worker-id", name, "--work-dir", (dir_ / name).string(),
            "--checkpoint-root", (dir_ / "runs").string(), "--data-root", (dir_ / "data").string(),
            "--lm", Env("SPHERET_LM"), "--grace", "5000", "--metrics-listen", metrics_listen},
        (dir_ / (name + ".out")).string(), (dir_ / (name + ".err")).string());
    return *workers_[name];
  }

  int64_t Submit(const std::string& yaml) {
    grpc::ClientContext context;
    v1::SubmitSweepRequest request;
    request.set_spec_yaml(yaml);
    v1::SubmitSweepResponse response;
    grpc::Status status = sweeps_->SubmitSweep(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response.sweep_id();
  }

  std::vector<v1::Trial> Trials(int64_t sweep) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::ListTrialsRequest request;
    request.set_sweep_id(sweep);
    v1::ListTrialsResponse response;
    if (!sweeps_->ListTrials(&context, request, &response).ok()) return {};
    return {response.trials().begin(), response.trials().end()};
  }

  // Polls until `done(trials)` or `timeout_s`; returns whether it held.
  bool WaitFor(int64_t sweep, int timeout_s,
               const std::function<bool(const std::vector<v1::Trial>&)>& done) {
    const auto deadline = Clock::now() + std::chrono::seconds(timeout_s);
    while (Clock::now() < deadline) {
      std::vector<v1::Trial> trials = Trials(sweep);
      if (!trials.empty() && done(trials)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return false;
  }

  static bool All(const std::vector<v1::Trial>& trials, v1::TrialState state) {
    return std::all_of(trials.begin(), trials.end(),
                       [&](const v1::Trial& t) { return t.state() == state; });
  }

  static int64_t LatestStep(const v1::Trial& trial, const std::string& metric = "train/loss") {
    for (const v1::MetricValue& value : trial.latest()) {
      if (value.name() == metric) return value.step();
    }
    return -1;
  }

  int64_t Query(const std::string& sql) {
    auto db = store::Database::Open((dir_ / "spheret.db").string(), /*read_only=*/true);
    EXPECT_TRUE(db.ok()) << db.status();
    absl::StatusOr<int64_t> value = (*db)->QueryInt(sql);
    EXPECT_TRUE(value.ok()) << value.status() << " in " << sql;
    return value.value_or(-1);
  }

  // The stored train/loss curve of a trial (superseded values left out) is steps 0..n-1, each once.
  void ExpectCompleteCurve(int64_t trial, int steps) {
    const std::string where =
        " FROM curves WHERE metric = 'train/loss' AND trial_id = " + std::to_string(trial);
    EXPECT_EQ(Query("SELECT count(*)" + where), steps) << "trial " << trial;
    EXPECT_EQ(Query("SELECT count(DISTINCT step)" + where), steps) << "trial " << trial;
    EXPECT_EQ(Query("SELECT min(step)" + where), 0);
    EXPECT_EQ(Query("SELECT max(step)" + where), steps - 1);
  }

  std::string Log(const std::string& name) {
    std::ifstream in(dir_ / (name + ".err"));
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  fs::path dir_;
  int coordinator_starts_ = 0;
  int port_ = 0;
  std::unique_ptr<ChildProcess> coordinator_;
  std::map<std::string, std::unique_ptr<ChildProcess>> workers_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::SweepService::Stub> sweeps_;
};

TEST_F(WorkerTest, FourTrialSweepRunsToSucceededWithAllMetricsStored) {
  StartWorker("a", 1, "127.0.0.1:0");
  StartWorker("b", 1);
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while ((Log("a").find("registered as") == std::string::npos ||
          Log("b").find("registered as") == std::string::npos) &&
         Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const int64_t sweep = Submit("name: four\ndataset: tiny\nbase: " + Base(30, 10) +
                               "\nparameters:\n  method: {values: [pre_ln, geonorm]}\n"
                               "seeds: [1, 2]\n");
  ASSERT_TRUE(WaitFor(sweep, 240, [](auto& t) { return All(t, v1::TRIAL_STATE_SUCCEEDED); }))
      << Log("a") << Log("b");
  for (const v1::Trial& trial : Trials(sweep)) {
    EXPECT_EQ(trial.attempt(), 1);
    ExpectCompleteCurve(trial.trial_id(), 30);
    const std::string id = std::to_string(trial.trial_id());
    EXPECT_EQ(Query("SELECT count(*) FROM curves WHERE metric = 'val/loss' AND trial_id = " + id),
              4)
        << "val/loss at steps 0, 10, 20, 30";
    EXPECT_EQ(Query("SELECT count(*) FROM events WHERE json LIKE '%\"type\":\"done\"%' AND "
                    "trial_id = " +
                    id),
              1);
    EXPECT_EQ(Query("SELECT count(*) FROM checkpoints WHERE trial_id = " + id), 3);
  }
  EXPECT_EQ(Query("SELECT count(*) FROM attempts WHERE worker_id IN ('a', 'b')"), 4);
  std::printf("four trials: %lld ran on worker a, %lld on worker b\n",
              static_cast<long long>(Query("SELECT count(*) FROM attempts WHERE worker_id = 'a'")),
              static_cast<long long>(Query("SELECT count(*) FROM attempts WHERE worker_id = 'b'")));
  // The worker's own /metrics (its port is at the end of its start-up line) passes promtool.
  const std::string log = Log("a");
  const size_t at = log.find(", metrics ");
  ASSERT_NE(at, std::string::npos) << log;
  const std::string page = testing_util::FetchMetrics(std::stoi(log.substr(at + 10)));
  EXPECT_NE(page.find("spheret_worker_slots{state=\"free\"} 1"), std::string::npos) << page;
  EXPECT_NE(page.find("spheret_worker_events_forwarded_total"), std::string::npos) << page;
  EXPECT_NE(page.find("spheret_worker_spool_depth "), std::string::npos) << page;
  EXPECT_NE(page.find("spheret_worker_trainer_processes "), std::string::npos) << page;
  std::string report;
  EXPECT_EQ(testing_util::PromtoolCheck(page, (dir_ / "metrics.txt").string(), &report), 0)
      << report;
}

TEST_F(WorkerTest, StoppedWorkerHandsItsTrialBackForAnotherToResume) {
  ChildProcess& a = StartWorker("a", 1);
  const int64_t sweep = Submit("name: handback\ndataset: tiny\nbase: " + Base(400, 10) +
                               "\nparameters:\n  method: {values: [pre_ln]}\n");
  ASSERT_TRUE(WaitFor(sweep, 120, [](auto& t) { return LatestStep(t[0]) >= 15; })) << Log("a");
  const auto start = Clock::now();
  const int status = a.Signal(SIGTERM);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "worker exit status " << status;
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 5.0 + 1.0)
      << "the worker took longer than the grace period";
  EXPECT_NE(Log("a").find("-> TRIAL_STATE_PENDING"), std::string::npos) << Log("a");
  std::vector<v1::Trial> trials = Trials(sweep);
  ASSERT_EQ(trials.size(), 1u);
  EXPECT_EQ(trials[0].state(), v1::TRIAL_STATE_PENDING) << "handed back, not failed";
  StartWorker("b", 1);
  ASSERT_TRUE(WaitFor(sweep, 120, [](auto& t) { return All(t, v1::TRIAL_STATE_SUCCEEDED); }))
      << Log("b");
  EXPECT_EQ(Trials(sweep)[0].attempt(), 2);
  EXPECT_NE(Log("b").find("resuming from a checkpoint"), std::string::npos);
  ExpectCompleteCurve(trials[0].trial_id(), 400);
}

TEST_F(WorkerTest, CancellingASweepStopsItsTrainersWithinTheGracePeriod) {
  StartWorker("a", 2);
  const int64_t sweep = Submit("name: long\ndataset: tiny\nbase: " + Base(100000, 100000) +
                               "\nparameters:\n  method: {values: [pre_ln]}\nseeds: [1, 2]\n");
  ASSERT_TRUE(WaitFor(sweep, 120, [](auto& trials) {
    return std::all_of(trials.begin(), trials.end(), [](auto& t) { return LatestStep(t) >= 2; });
  })) << Log("a");
  const auto start = Clock::now();
  grpc::ClientContext context;
  v1::CancelSweepRequest cancel;
  cancel.set_sweep_id(sweep);
  v1::CancelResponse response;
  ASSERT_TRUE(sweeps_->CancelSweep(&context, cancel, &response).ok());
  EXPECT_EQ(response.stopping_running(), 2);
  ASSERT_TRUE(WaitFor(sweep, 30, [](auto& t) { return All(t, v1::TRIAL_STATE_CANCELLED); }))
      << Log("a");
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  // The worker hears of it on its next heartbeat (every TTL/3 s); the trainers checkpoint and exit
  // on SIGTERM long before the 5 s grace runs out.
  EXPECT_LT(seconds, kLeaseTtlS / 3.0 + 5.0 + 1.0);
  std::printf("cancel: both trials CANCELLED %.1f s after CancelSweep\n", seconds);
  EXPECT_NE(Log("a").find("-> TRIAL_STATE_CANCELLED"), std::string::npos);
}

// The first spheret-lm whose parent is `parent`, or 0.
pid_t TrainerOf(pid_t parent) {
  for (const auto& entry : fs::directory_iterator("/proc")) {
    std::ifstream stat(entry.path() / "stat");
    std::string pid, comm, state;
    pid_t ppid = 0;
    if (stat >> pid >> comm >> state >> ppid && ppid == parent && comm == "(spheret-lm)") {
      return std::stoi(pid);
    }
  }
  return 0;
}

TEST_F(WorkerTest, KilledWorkerTrialFinishesOnTheOtherFromItsCheckpoint) {
  ChildProcess& a = StartWorker("a", 1);
  const int64_t sweep = Submit("name: moved\ndataset: tiny\nbase: " + Base(300, 10) +
                               "\nparameters:\n  method: {values: [geonorm]}\n");
  ASSERT_TRUE(WaitFor(sweep, 120, [](auto& t) { return LatestStep(t[0]) >= 25; })) << Log("a");
  a.Signal(SIGKILL);  // its trainer dies on its next write to the closed pipe
  StartWorker("b", 1);
  ASSERT_TRUE(WaitFor(sweep, 180, [](auto& t) { return All(t, v1::TRIAL_STATE_SUCCEEDED); }))
      << Log("b");
  const v1::Trial trial = Trials(sweep)[0];
  EXPECT_EQ(trial.attempt(), 2);
  const std::string id = std::to_string(trial.trial_id());
  EXPECT_EQ(Query("SELECT count(*) FROM attempts WHERE attempt = 2 AND worker_id = 'b' AND "
                  "trial_id = " +
                  id),
            1);
  EXPECT_NE(Log("b").find("resuming from a checkpoint"), std::string::npos) << Log("b");
  EXPECT_GT(Query("SELECT count(*) FROM scalars WHERE superseded = 1 AND trial_id = " + id), 0)
      << "attempt 1 ran past the checkpoint attempt 2 resumed from";
  ExpectCompleteCurve(trial.trial_id(), 300);
}

TEST_F(WorkerTest, FrozenWorkerPastItsLeaseIsRefusedAndDropsTheTrial) {
  ChildProcess& a = StartWorker("a", 1);
  const int64_t sweep = Submit("name: frozen\ndataset: tiny\nbase: " + Base(400, 50) +
                               "\nparameters:\n  method: {values: [pre_ln]}\n");
  ASSERT_TRUE(WaitFor(sweep, 120, [](auto& t) { return LatestStep(t[0]) >= 5; })) << Log("a");
  a.Send(SIGSTOP);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // calls in flight land
  const std::string attempt1 = "SELECT count(*) FROM scalars WHERE attempt = 1";
  const int64_t rows_at_stop = Query(attempt1);
  StartWorker("b", 1);
  ASSERT_TRUE(WaitFor(sweep, 60, [](auto& t) { return t[0].attempt() == 2; })) << Log("b");
  a.Send(SIGCONT);
  ASSERT_TRUE(WaitFor(sweep, 240, [](auto& t) { return All(t, v1::TRIAL_STATE_SUCCEEDED); }))
      << Log("a") << Log("b");
  EXPECT_EQ(Query(attempt1), rows_at_stop) << "a write of the stale attempt was stored";
  EXPECT_NE(Log("a").find("refused"), std::string::npos) << Log("a");
  const auto deadline = Clock::now() + std::chrono::seconds(15);
  while (TrainerOf(a.pid()) != 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(TrainerOf(a.pid()), 0) << "the frozen worker kept its stale trainer";
  ExpectCompleteCurve(Trials(sweep)[0].trial_id(), 400);
}

TEST_F(WorkerTest, CoordinatorAwayFor20SecondsLosesAndDoublesNothing) {
  StartWorker("a", 1);
  const int steps = 1500;
  const int64_t sweep = Submit("name: outage\ndataset: tiny\nbase: " + Base(steps, 500) +
                               "\nparameters:\n  method: {values: [pre_ln]}\n");
  ASSERT_TRUE(WaitFor(sweep, 120, [](auto& t) { return LatestStep(t[0]) >= 20; })) << Log("a");
  EXPECT_EQ(coordinator_->Signal(SIGTERM), 0);
  std::this_thread::sleep_for(std::chrono::seconds(20));
  StartCoordinator("127.0.0.1:" + std::to_string(port_));
  ASSERT_TRUE(WaitFor(sweep, 240, [](auto& t) { return All(t, v1::TRIAL_STATE_SUCCEEDED); }))
      << Log("a");
  const v1::Trial trial = Trials(sweep)[0];
  EXPECT_EQ(trial.attempt(), 1) << "the lease outlived the outage";
  ExpectCompleteCurve(trial.trial_id(), steps);
  EXPECT_EQ(Query("SELECT count(*) FROM scalars WHERE metric_id = (SELECT metric_id FROM "
                  "metric_names WHERE name = 'train/loss')"),
            steps)
      << "every step stored once";
}

TEST_F(WorkerTest, KilledTrainerFailsTheAttemptWithItsStderrAndIsRetried) {
  ChildProcess& a = StartWorker("a", 1);
  const int64_t sweep = Submit("name: crashy\ndataset: tiny\nbase: " + Base(200, 20) +
                               "\nparameters:\n  method: {values: [pre_ln]}\n");
  ASSERT_TRUE(WaitFor(sweep, 120, [](auto& t) { return LatestStep(t[0]) >= 25; })) << Log("a");
  const pid_t trainer = TrainerOf(a.pid());
  ASSERT_GT(trainer, 0);
  kill(trainer, SIGKILL);
  ASSERT_TRUE(WaitFor(sweep, 180, [](auto& t) { return All(t, v1::TRIAL_STATE_SUCCEEDED); }))
      << Log("a");
  const v1::Trial trial = Trials(sweep)[0];
  EXPECT_EQ(trial.attempt(), 2);
  const std::string first =
      " FROM attempts WHERE attempt = 1 AND trial_id = " + std::to_string(trial.trial_id());
  EXPECT_EQ(Query("SELECT outcome = 'FAILED'" + first), 1);
  EXPECT_EQ(Query("SELECT exit_code" + first), 128 + SIGKILL);
  EXPECT_GT(Query("SELECT length(stderr_tail)" + first), 0) << "the stderr tail is recorded";
  ExpectCompleteCurve(trial.trial_id(), 200);
}

TEST_F(WorkerTest, TwoRankGangAcrossTwoWorkersTrainsOneCurve) {
  StartWorker("a", 1);
  StartWorker("b", 1);
  std::string base = Base(30, 10);
  base.replace(base.find("gradient_accumulation_steps: 1"), 30, "gradient_accumulation_steps: 2");
  const int64_t sweep = Submit("name: gang\ndataset: tiny\nbase: " + base +
                               "\nparameters:\n  method: {values: [pre_ln]}\n"
                               "resources: {nodes: 2, cpu_slots: 1}\n");
  ASSERT_TRUE(WaitFor(sweep, 180, [](auto& t) { return All(t, v1::TRIAL_STATE_SUCCEEDED); }))
      << Log("a") << Log("b");
  const v1::Trial trial = Trials(sweep)[0];
  EXPECT_EQ(trial.attempt(), 1);
  ExpectCompleteCurve(trial.trial_id(), 30);
  EXPECT_NE((Log("a") + Log("b")).find("started 1 rank(s)"), std::string::npos);
}

}  // namespace
}  // namespace spheret
