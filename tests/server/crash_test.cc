// SIGKILL the coordinator process in the middle of metric ingestion, restart it on the same file,
// and check that nothing acknowledged was lost, nothing was duplicated, and the workers carry on.
// The coordinator binary comes from $SPHERET_COORDINATOR.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "server/store/sqlite_db.h"
#include "spheret/v1/sweeps.grpc.pb.h"
#include "spheret/v1/workers.grpc.pb.h"
#include "tests/integration/child_process.h"
#include "tests/server/metrics_check.h"

namespace spheret {
namespace {

using Clock = std::chrono::steady_clock;

// A coordinator process on `db`; reads its "listening PORT metrics PORT" line.
class CoordinatorProcess {
 public:
  CoordinatorProcess(const std::filesystem::path& dir, const std::string& listen,
                     const std::string& metrics_listen = "")
      : process_({std::getenv("SPHERET_COORDINATOR"), "--db", (dir / "spheret.db").string(),
                  "--listen", listen, "--metrics-listen", metrics_listen, "--lease-ttl", "30"},
                 // A fresh stdout file per start: FirstLine must not read the previous one's.
                 (dir / ("coordinator-" + std::to_string(++starts_) + ".out")).string(),
                 (dir / "coordinator.err").string()) {
    std::sscanf(process_.FirstLine().c_str(), "listening %d metrics %d", &port_, &metrics_port_);
  }
  int port() const { return port_; }
  int metrics_port() const { return metrics_port_; }
  int Signal(int signal) { return process_.Signal(signal); }

 private:
  static inline int starts_ = 0;
  testing_util::ChildProcess process_;
  int port_ = 0, metrics_port_ = 0;
};

// Submits the four-trial sweep, registers `registration`'s worker and leases every trial.
std::vector<v1::Lease> LeaseFourTrials(v1::SweepService::Stub& sweeps,
                                       v1::WorkerService::Stub& workers,
                                       const v1::RegisterRequest& registration) {
  grpc::ClientContext submit_context;
  v1::SubmitSweepRequest submit;
  submit.set_spec_yaml(
      "name: crash\ndataset: d\nparameters:\n  method: {values: [pre_ln, "
      "geonorm]}\nseeds: [1, 2]\n");
  v1::SubmitSweepResponse submitted;
  EXPECT_TRUE(sweeps.SubmitSweep(&submit_context, submit, &submitted).ok());
  EXPECT_EQ(submitted.created_trials(), 4);
  grpc::ClientContext register_context;
  v1::RegisterResponse registered;
  EXPECT_TRUE(workers.Register(&register_context, registration, &registered).ok());
  grpc::ClientContext acquire_context;
  v1::AcquireRequest acquire;
  acquire.set_worker_id(registration.worker_id());
  acquire.set_free_slots(4);
  acquire.set_max_trials(4);
  v1::AcquireResponse acquired;
  EXPECT_TRUE(workers.Acquire(&acquire_context, acquire, &acquired).ok());
  return {acquired.leases().begin(), acquired.leases().end()};
}

// One "trainer" per lease streaming batches of 50 steps; a batch counts once its stream is
// acknowledged, and an unacknowledged batch is sent again (replays must not double anything).
class FakeTrainers {
 public:
  static constexpr int kBatch = 50;

  FakeTrainers(v1::WorkerService::Stub* workers, const std::vector<v1::Lease>& leases)
      : workers_(workers) {
    for (const v1::Lease& lease : leases) {
      threads_.emplace_back([this, trial = lease.trial_id()] { Stream(trial); });
    }
  }
  ~FakeTrainers() { Stop(); }

  // Whether `count` batches were acknowledged within 30 s.
  bool WaitForBatches(int64_t count) const {
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while (acked_batches_ < count && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return acked_batches_ >= count;
  }
  void Stop() {
    stop_ = true;
    for (std::thread& thread : threads_) thread.join();
    threads_.clear();
  }
  int64_t acked_batches() const { return acked_batches_; }
  int64_t failed_calls() const { return failed_calls_; }
  std::map<int64_t, int64_t> acked_steps() {
    std::lock_guard<std::mutex> lock(mutex_);
    return acked_steps_;
  }

 private:
  void Stream(int64_t trial) {
    int64_t next = 0;
    while (!stop_) {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      context.set_wait_for_ready(true);
      v1::IngestEventsResponse response;
      auto writer = workers_->IngestEvents(&context, &response);
      v1::EventBatch batch;
      batch.set_trial_id(trial);
      batch.set_attempt(1);
      for (int64_t step = next; step < next + kBatch; ++step) {
        v1::MetricRow* row = batch.add_metrics();
        row->set_name(step % 2 == 0 ? "train/loss" : "lr");
        row->set_step(step);
        row->set_value(1.0 / (step + 1));
      }
      writer->Write(batch);
      writer->WritesDone();
      if (!writer->Finish().ok()) {
        ++failed_calls_;
        continue;
      }
      next += kBatch;
      ++acked_batches_;
      std::lock_guard<std::mutex> lock(mutex_);
      acked_steps_[trial] = next;
    }
  }

  v1::WorkerService::Stub* workers_;
  std::mutex mutex_;
  std::map<int64_t, int64_t> acked_steps_;  // trial -> steps acknowledged (0..n-1)
  std::atomic<int64_t> acked_batches_{0}, failed_calls_{0};
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

void FinishAll(v1::WorkerService::Stub& workers, const std::vector<v1::Lease>& leases) {
  for (const v1::Lease& lease : leases) {
    grpc::ClientContext context;
    v1::FinishRequest request;
    request.set_worker_id("w");
    request.set_trial_id(lease.trial_id());
    request.set_attempt(1);
    request.set_outcome(v1::TRIAL_STATE_SUCCEEDED);
    v1::FinishResponse response;
    ASSERT_TRUE(workers.Finish(&context, request, &response).ok());
    EXPECT_EQ(response.state(), v1::TRIAL_STATE_SUCCEEDED);
  }
}

// The database is whole, holds the four trials once, and every acknowledged step once.
void ExpectNothingLostOrDoubled(const std::string& db, const std::map<int64_t, int64_t>& acked) {
  auto database = *store::Database::Open(db, /*read_only=*/true);
  store::Statement* check = *database->Prepare("PRAGMA integrity_check");
  ASSERT_TRUE(*check->Step());
  EXPECT_EQ(check->Text(0), "ok");
  check->Reset();
  EXPECT_EQ(*database->QueryInt("SELECT count(*) FROM trials"), 4) << "no trial lost or doubled";
  EXPECT_EQ(*database->QueryInt("SELECT count(*) FROM trials WHERE state = 'SUCCEEDED'"), 4);
  EXPECT_EQ(*database->QueryInt("SELECT count(*) FROM sweeps"), 1);
  for (const auto& [trial, steps] : acked) {
    // Every acknowledged step is stored, once; a batch that was stored but not acknowledged
    // before the kill may add steps beyond, never duplicates (a stored step of an attempt is not
    // stored again).
    const std::string where = " FROM scalars WHERE trial_id = " + std::to_string(trial);
    EXPECT_EQ(*database->QueryInt("SELECT count(DISTINCT step)" + where + " AND step < " +
                                  std::to_string(steps)),
              steps)
        << "trial " << trial;
    EXPECT_EQ(*database->QueryInt("SELECT count(*)" + where),
              *database->QueryInt("SELECT count(DISTINCT step)" + where));
    EXPECT_EQ(*database->QueryInt("SELECT sum(count) FROM summaries WHERE trial_id = " +
                                  std::to_string(trial)),
              *database->QueryInt("SELECT count(*)" + where))
        << "summaries count each stored row once";
  }
}

// The worker registers again listing the attempt 1 of each of `leases` as running: it
// reattaches them all and keeps them.
void ReattachAll(v1::WorkerService::Stub& workers, v1::RegisterRequest registration,
                 const std::vector<v1::Lease>& leases) {
  for (const v1::Lease& lease : leases) {
    v1::AttemptId* running = registration.add_running();
    running->set_trial_id(lease.trial_id());
    running->set_attempt(1);
  }
  grpc::ClientContext context;
  context.set_wait_for_ready(true);
  v1::RegisterResponse response;
  ASSERT_TRUE(workers.Register(&context, registration, &response).ok());
  EXPECT_EQ(response.reattached_size(), static_cast<int>(leases.size()))
      << "every lease survived the crash";
}

// The restarted binary's /metrics, with running trials, shows their train loss and passes
// promtool.
void ExpectMetricsPassPromtool(int metrics_port, const std::filesystem::path& dir) {
  const std::string page = testing_util::FetchMetrics(metrics_port);
  EXPECT_NE(page.find("spheret_train_loss{"), std::string::npos) << page;
  std::string report;
  EXPECT_EQ(testing_util::PromtoolCheck(page, (dir / "metrics.txt").string(), &report), 0)
      << report;
}

TEST(CrashTest, SigkillDuringIngestionLosesNoAcknowledgedWrite) {
  ASSERT_NE(std::getenv("SPHERET_COORDINATOR"), nullptr) << "set SPHERET_COORDINATOR";
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("spheret_crash_test_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto coordinator = std::make_unique<CoordinatorProcess>(dir, "127.0.0.1:0");
  const int port = coordinator->port();
  ASSERT_GT(port, 0) << "the coordinator did not start";
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 200);
  auto channel = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port),
                                           grpc::InsecureChannelCredentials(), args);
  auto sweeps = v1::SweepService::NewStub(channel);
  auto workers = v1::WorkerService::NewStub(channel);
  v1::RegisterRequest registration;
  registration.set_worker_id("w");
  registration.set_cpu_slots(4);
  const std::vector<v1::Lease> leases = LeaseFourTrials(*sweeps, *workers, registration);
  ASSERT_EQ(leases.size(), 4u);

  FakeTrainers trainers(workers.get(), leases);
  ASSERT_TRUE(trainers.WaitForBatches(40));
  const int status = coordinator->Signal(SIGKILL);  // mid-ingestion
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  const int64_t acked_at_kill = trainers.acked_batches();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  coordinator =
      std::make_unique<CoordinatorProcess>(dir, "127.0.0.1:" + std::to_string(port), "127.0.0.1:0");
  ASSERT_EQ(coordinator->port(), port) << "the coordinator did not restart";

  ReattachAll(*workers, registration, leases);
  ASSERT_TRUE(trainers.WaitForBatches(acked_at_kill + 40)) << "ingestion did not resume";
  ExpectMetricsPassPromtool(coordinator->metrics_port(), dir);
  trainers.Stop();
  FinishAll(*workers, leases);
  EXPECT_EQ(coordinator->Signal(SIGTERM), 0) << "clean exit on SIGTERM";
  ExpectNothingLostOrDoubled((dir / "spheret.db").string(), trainers.acked_steps());
  std::printf(
      "crash test: %lld batches acknowledged before SIGKILL, %lld in all, %lld calls "
      "failed while the coordinator was down\n",
      static_cast<long long>(acked_at_kill), static_cast<long long>(trainers.acked_batches()),
      static_cast<long long>(trainers.failed_calls()));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace spheret
