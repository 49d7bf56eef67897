// Test fixture: a coordinator and workers as real processes on loopback (spheret-coordinator,
// spheret-worker, spheret-lm, spheret; their paths are compiled in, $SPHERET_COORDINATOR,
// $SPHERET_WORKER, $SPHERET_LM and $SPHERET_CLI override them), a tiny prepared data set, and
// helpers to submit, poll and read the database. Used by the worker integration tests and the chaos
// test.
#pragma once

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "server/store/sqlite_db.h"
#include "spheret/v1/sweeps.grpc.pb.h"
#include "tests/integration/child_process.h"

namespace spheret::testing_util {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// A binary's path: the environment variable when set, else the one built beside this test.
inline std::string Env(const char* name) {
  if (const char* value = std::getenv(name); value != nullptr) return value;
  const std::string key = name;
  if (key == "SPHERET_COORDINATOR") return SPHERET_COORDINATOR_PATH;
  if (key == "SPHERET_WORKER") return SPHERET_WORKER_PATH;
  if (key == "SPHERET_CLI") return SPHERET_CLI_PATH;
  return SPHERET_LM_PATH;
}

// Config knobs of a short run on the tiny data set.
inline std::string Base(int max_iters, int eval_interval) {
  return "{scale: xs, block_size: 32, batch_size: 4, gradient_accumulation_steps: 1, max_iters: " +
         std::to_string(max_iters) +
         ", warmup_iters: 2, lr_decay_iters: " + std::to_string(max_iters) +
         ", eval_interval: " + std::to_string(eval_interval) +
         ", eval_iters: 2, log_interval: 1, learning_rate: 1e-3}";
}

class ClusterTest : public testing::Test {
 protected:
  static constexpr int kLeaseTtlS = 4;

  void SetUp() override {
    std::string name = testing::UnitTest::GetInstance()->current_test_info()->name();
    std::replace(name.begin(), name.end(), '/', '_');  // parameterized tests: "Name/0"
    dir_ = fs::temp_directory_path() /
           ("spheret_worker_test_" + std::to_string(getpid()) + "_" + name);
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "text");
    db_ = dir_ / "spheret.db";
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
    // Kept when the test failed, or when SPHERET_KEEP_TEST_DIR is set (to read its logs).
    if (!HasFailure() && std::getenv("SPHERET_KEEP_TEST_DIR") == nullptr) fs::remove_all(dir_);
  }

  // Starts spheret-coordinator on `db_` with `coordinator_flags_`; the test's channel to it uses
  // `credentials_`.
  void StartCoordinator(const std::string& listen) {
    std::vector<std::string> argv = {Env("SPHERET_COORDINATOR"),
                                     "--db",
                                     db_.string(),
                                     "--listen",
                                     listen,
                                     "--metrics-listen",
                                     "",
                                     "--lease-ttl",
                                     std::to_string(lease_ttl_s_),
                                     "--retry-backoff",
                                     retry_backoff_s_};
    argv.insert(argv.end(), coordinator_flags_.begin(), coordinator_flags_.end());
    coordinator_ = std::make_unique<ChildProcess>(
        argv, (dir_ / ("coordinator-" + std::to_string(++coordinator_starts_) + ".out")).string(),
        (dir_ / "coordinator.err").string());
    const std::string line = coordinator_->FirstLine();
    ASSERT_EQ(std::sscanf(line.c_str(), "listening %d", &port_), 1) << "coordinator: " << line;
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(port_), credentials_);
    sweeps_ = v1::SweepService::NewStub(channel_);
  }

  ChildProcess& StartWorker(const std::string& name, int slots,
                            const std::string& metrics_listen = "",
                            const std::string& lm = Env("SPHERET_LM")) {
    std::vector<std::string> argv = {Env("SPHERET_WORKER"),
                                     "--coordinator",
                                     "127.0.0.1:" + std::to_string(port_),
                                     "--cpu-slots",
                                     std::to_string(slots),
                                     "--worker-id",
                                     name,
                                     "--work-dir",
                                     (dir_ / name).string(),
                                     "--checkpoint-root",
                                     (dir_ / "runs").string(),
                                     "--data-root",
                                     (dir_ / "data").string(),
                                     "--lm",
                                     lm,
                                     "--grace",
                                     std::to_string(grace_ms_),
                                     "--metrics-listen",
                                     metrics_listen};
    argv.insert(argv.end(), worker_flags_.begin(), worker_flags_.end());
    workers_[name] = std::make_unique<ChildProcess>(argv, (dir_ / (name + ".out")).string(),
                                                    (dir_ / (name + ".err")).string());
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

  // Polls `done` every 50 ms until it holds or `timeout_s` passes; returns whether it held.
  static bool WaitUntil(int timeout_s, const std::function<bool()>& done) {
    const auto deadline = Clock::now() + std::chrono::seconds(timeout_s);
    while (!done()) {
      if (Clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return true;
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
    auto db = store::Database::Open(db_.string(), /*read_only=*/true);
    EXPECT_TRUE(db.ok()) << db.status();
    absl::StatusOr<int64_t> value = (*db)->QueryInt(sql);
    EXPECT_TRUE(value.ok()) << value.status() << " in " << sql;
    return value.value_or(-1);
  }

  // The first column of the first row of `sql`, as text ("" when there is none).
  std::string QueryText(const std::string& sql) {
    auto db = store::Database::Open(db_.string(), /*read_only=*/true);
    EXPECT_TRUE(db.ok()) << db.status();
    if (!db.ok()) return "";
    sqlite3_stmt* statement = nullptr;
    std::string text;
    if (sqlite3_prepare_v2((*db)->raw(), sql.c_str(), -1, &statement, nullptr) == SQLITE_OK &&
        sqlite3_step(statement) == SQLITE_ROW && sqlite3_column_text(statement, 0) != nullptr) {
      text = reinterpret_cast<const char*>(sqlite3_column_text(statement, 0));
    }
    sqlite3_finalize(statement);
    return text;
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
  fs::path db_;                                                // the coordinator's database
  std::string retry_backoff_s_ = "5";                          // the coordinator's --retry-backoff
  int lease_ttl_s_ = kLeaseTtlS;                               // the coordinator's --lease-ttl
  int grace_ms_ = 5'000;                                       // the workers' --grace
  std::vector<std::string> coordinator_flags_, worker_flags_;  // more flags for each
  std::shared_ptr<grpc::ChannelCredentials> credentials_ = grpc::InsecureChannelCredentials();
  int coordinator_starts_ = 0;
  int port_ = 0;
  std::unique_ptr<ChildProcess> coordinator_;
  std::map<std::string, std::unique_ptr<ChildProcess>> workers_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::SweepService::Stub> sweeps_;
};

}  // namespace spheret::testing_util
