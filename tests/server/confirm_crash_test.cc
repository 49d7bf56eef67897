// SIGKILL the coordinator between a search group's last rung and its confirm trials (the
// before_confirm crash point: the group's last trial has ended and is stored, the confirm trials
// are not), restart it on the same file, and check that they are added, once.
// The coordinator binary comes from $SPHERET_COORDINATOR.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "server/store/sqlite_db.h"
#include "spheret/v1/sweeps.grpc.pb.h"
#include "spheret/v1/workers.grpc.pb.h"
#include "tests/integration/child_process.h"

namespace spheret {
namespace {

namespace fs = std::filesystem;

// Two learning rates of one group; rungs at 10 and 30 below max_iters 50.
constexpr char kSweep[] = R"(name: confirm-crash
dataset: d
base: {max_iters: 50, eval_interval: 10}
parameters:
  learning_rate: {values: [1e-3, 2e-3]}
search: {strategy: asha, min_iters: 10, confirm: {seeds: [7, 8], top: 1}}
)";

std::unique_ptr<testing_util::ChildProcess> StartCoordinator(const fs::path& dir, int start,
                                                             int* port) {
  auto process = std::make_unique<testing_util::ChildProcess>(
      std::vector<std::string>{std::getenv("SPHERET_COORDINATOR"), "--db",
                               (dir / "spheret.db").string(), "--listen", "127.0.0.1:0",
                               "--metrics-listen", "127.0.0.1:0"},
      (dir / ("coordinator-" + std::to_string(start) + ".out")).string(),
      (dir / "coordinator.err").string());
  *port = 0;
  std::sscanf(process->FirstLine().c_str(), "listening %d", port);
  return process;
}

int64_t Count(const fs::path& dir, const std::string& where) {
  auto db = *store::Database::Open((dir / "spheret.db").string(), /*read_only=*/true);
  return *db->QueryInt("SELECT count(*) FROM trials WHERE " + where);
}

class Cluster {
 public:
  explicit Cluster(int port) {
    auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                       grpc::InsecureChannelCredentials());
    sweeps_ = v1::SweepService::NewStub(channel);
    workers_ = v1::WorkerService::NewStub(channel);
  }
  void SubmitAndLease() {
    grpc::ClientContext submit_context;
    v1::SubmitSweepRequest submit;
    submit.set_spec_yaml(kSweep);
    v1::SubmitSweepResponse submitted;
    ASSERT_TRUE(sweeps_->SubmitSweep(&submit_context, submit, &submitted).ok());
    grpc::ClientContext register_context;
    v1::RegisterRequest registration;
    registration.set_worker_id("w");
    registration.set_cpu_slots(2);
    v1::RegisterResponse registered;
    ASSERT_TRUE(workers_->Register(&register_context, registration, &registered).ok());
    grpc::ClientContext acquire_context;
    v1::AcquireRequest acquire;
    acquire.set_worker_id("w");
    acquire.set_free_slots(2);
    acquire.set_max_trials(2);
    v1::AcquireResponse acquired;
    ASSERT_TRUE(workers_->Acquire(&acquire_context, acquire, &acquired).ok());
    ASSERT_EQ(acquired.leases_size(), 2);
  }
  void Report(int64_t trial, int64_t step, double value) {
    grpc::ClientContext context;
    v1::IngestEventsResponse response;
    auto writer = workers_->IngestEvents(&context, &response);
    v1::EventBatch batch;
    batch.set_trial_id(trial);
    batch.set_attempt(1);
    v1::MetricRow* row = batch.add_metrics();
    row->set_name("val/loss");
    row->set_step(step);
    row->set_value(value);
    writer->Write(batch);
    writer->WritesDone();
    ASSERT_TRUE(writer->Finish().ok());
  }
  grpc::Status Finish(int64_t trial, v1::TrialState outcome) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::FinishRequest request;
    request.set_worker_id("w");
    request.set_trial_id(trial);
    request.set_attempt(1);
    request.set_outcome(outcome);
    v1::FinishResponse response;
    return workers_->Finish(&context, request, &response);
  }

 private:
  std::unique_ptr<v1::SweepService::Stub> sweeps_;
  std::unique_ptr<v1::WorkerService::Stub> workers_;
};

TEST(ConfirmCrashTest, SigkillBeforeTheConfirmTrialsAddsThemOnceOnRestart) {
  ASSERT_NE(std::getenv("SPHERET_COORDINATOR"), nullptr) << "set SPHERET_COORDINATOR";
  const fs::path dir =
      fs::temp_directory_path() / ("spheret_confirm_crash_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  int port = 0;
  setenv("SPHERET_FAILPOINT", "before_confirm", 1);
  auto coordinator = StartCoordinator(dir, 1, &port);
  unsetenv("SPHERET_FAILPOINT");
  ASSERT_GT(port, 0) << "the coordinator did not start";
  {
    Cluster cluster(port);
    cluster.SubmitAndLease();
    cluster.Report(1, 10, 3.0);                                      // the best of 1: continues
    cluster.Report(2, 10, 3.5);                                      // worse: pruned at rung 0
    ASSERT_TRUE(cluster.Finish(2, v1::TRIAL_STATE_CANCELLED).ok());  // the worker stopped it
    cluster.Report(1, 30, 2.5);
    cluster.Report(1, 50, 2.0);
    // The group's last trial ends: stored, then the crash point kills the coordinator before the
    // confirm trials are stored (the Finish may or may not be answered).
    (void)cluster.Finish(1, v1::TRIAL_STATE_SUCCEEDED);
  }
  const int status = coordinator->Wait();
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
  EXPECT_EQ(Count(dir, "state = 'SUCCEEDED'"), 1);
  EXPECT_EQ(Count(dir, "state = 'PRUNED'"), 1);
  EXPECT_EQ(Count(dir, "role = 'confirm'"), 0) << "killed before the confirm trials";

  for (int start = 2; start <= 3; ++start) {  // restarted twice: added by the first, once
    coordinator = StartCoordinator(dir, start, &port);
    ASSERT_GT(port, 0) << "the coordinator did not restart";
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (Count(dir, "role = 'confirm'") < 2 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // 3 housekeeping passes
    EXPECT_EQ(Count(dir, "role = 'confirm'"), 2) << "start " << start;
    EXPECT_EQ(Count(dir,
                    "role = 'confirm' AND json_extract(config_json, '$.learning_rate') = "
                    "0.001 AND state = 'PENDING'"),
              2);
    EXPECT_EQ(coordinator->Signal(SIGTERM) & 0x7f, 0) << "exits cleanly on SIGTERM";
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace spheret
