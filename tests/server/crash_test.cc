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

TEST(CrashTest, SigkillDuringIngestionLosesNoAcknowledgedWrite) {
  ASSERT_NE(std::getenv("SPHERET_COORDINATOR"), nullptr) << "set SPHERET_COORDINATOR";
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("spheret_crash_test_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string db = (dir / "spheret.db").string();

  auto coordinator = std::make_unique<CoordinatorProcess>(dir, "127.0.0.1:0");
  const int port = coordinator->port();
  ASSERT_GT(port, 0) << "the coordinator did not start";
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 200);
  auto channel = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port),
                                           grpc::InsecureChannelCredentials(), args);
  auto sweeps = v1::SweepService::NewStub(channel);
  auto workers = v1::WorkerService::NewStub(channel);

  {
    grpc::ClientContext context;
    v1::SubmitSweepRequest request;
    request.set_spec_yaml(
        "name: crash\ndataset: d\nparameters:\n  method: {values: [pre_ln, "
        "geonorm]}\nseeds: [1, 2]\n");
    v1::SubmitSweepResponse response;
    ASSERT_TRUE(sweeps->SubmitSweep(&context, request, &response).ok());
    ASSERT_EQ(response.created_trials(), 4);
  }
  v1::RegisterRequest registration;
  registration.set_worker_id("w");
  registration.set_cpu_slots(4);
  {
    grpc::ClientContext context;
    v1::RegisterResponse response;
    ASSERT_TRUE(workers->Register(&context, registration, &response).ok());
  }
  std::vector<v1::Lease> leases;
  {
    grpc::ClientContext context;
    v1::AcquireRequest request;
    request.set_worker_id("w");
    request.set_free_slots(4);
    request.set_max_trials(4);
    v1::AcquireResponse response;
    ASSERT_TRUE(workers->Acquire(&context, request, &response).ok());
    leases.assign(response.leases().begin(), response.leases().end());
  }
  ASSERT_EQ(leases.size(), 4u);

  // Each "trainer" streams batches of 50 steps; a batch counts once its stream is acknowledged,
  // and an unacknowledged batch is sent again (replays must not double anything).
  constexpr int kBatch = 50;
  std::mutex mutex;
  std::map<int64_t, int64_t> acked_steps;  // trial -> steps acknowledged (0..n-1)
  std::atomic<int64_t> acked_batches{0}, failed_calls{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> trainers;
  for (const v1::Lease& lease : leases) {
    trainers.emplace_back([&, trial = lease.trial_id()] {
      int64_t next = 0;
      while (!stop) {
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
        context.set_wait_for_ready(true);
        v1::ReportEventsResponse response;
        auto writer = workers->ReportEvents(&context, &response);
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
        if (writer->Finish().ok()) {
          next += kBatch;
          ++acked_batches;
          std::lock_guard<std::mutex> lock(mutex);
          acked_steps[trial] = next;
        } else {
          ++failed_calls;
        }
      }
    });
  }
  const auto wait_for_batches = [&](int64_t count) {
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while (acked_batches < count && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return acked_batches >= count;
  };
  ASSERT_TRUE(wait_for_batches(40));
  const int status = coordinator->Signal(SIGKILL);  // mid-ingestion
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  const int64_t acked_at_kill = acked_batches;
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  coordinator =
      std::make_unique<CoordinatorProcess>(dir, "127.0.0.1:" + std::to_string(port), "127.0.0.1:0");
  ASSERT_EQ(coordinator->port(), port) << "the coordinator did not restart";

  // The worker reattaches its running trials and keeps them.
  for (const v1::Lease& lease : leases) {
    v1::RunningTrial* running = registration.add_running();
    running->set_trial_id(lease.trial_id());
    running->set_attempt(1);
  }
  {
    grpc::ClientContext context;
    context.set_wait_for_ready(true);
    v1::RegisterResponse response;
    ASSERT_TRUE(workers->Register(&context, registration, &response).ok());
    EXPECT_EQ(response.reattached_size(), 4) << "every lease survived the crash";
  }
  ASSERT_TRUE(wait_for_batches(acked_at_kill + 40)) << "ingestion did not resume";
  // The restarted binary's /metrics, with four running trials, passes promtool.
  const std::string page = testing_util::FetchMetrics(coordinator->metrics_port());
  EXPECT_NE(page.find("spheret_train_loss{"), std::string::npos) << page;
  std::string report;
  EXPECT_EQ(testing_util::PromtoolCheck(page, (dir / "metrics.txt").string(), &report), 0)
      << report;
  stop = true;
  for (std::thread& t : trainers) t.join();
  for (const v1::Lease& lease : leases) {
    grpc::ClientContext context;
    v1::FinishRequest request;
    request.set_worker_id("w");
    request.set_trial_id(lease.trial_id());
    request.set_attempt(1);
    request.set_outcome(v1::TRIAL_STATE_SUCCEEDED);
    v1::FinishResponse response;
    ASSERT_TRUE(workers->Finish(&context, request, &response).ok());
    EXPECT_EQ(response.state(), v1::TRIAL_STATE_SUCCEEDED);
  }
  EXPECT_EQ(coordinator->Signal(SIGTERM), 0) << "clean exit on SIGTERM";

  auto database = *store::Database::Open(db, /*read_only=*/true);
  store::Statement* check = *database->Prepare("PRAGMA integrity_check");
  ASSERT_TRUE(*check->Step());
  EXPECT_EQ(check->Text(0), "ok");
  check->Reset();
  EXPECT_EQ(*database->QueryInt("SELECT count(*) FROM trials"), 4) << "no trial lost or doubled";
  EXPECT_EQ(*database->QueryInt("SELECT count(*) FROM trials WHERE state = 'SUCCEEDED'"), 4);
  EXPECT_EQ(*database->QueryInt("SELECT count(*) FROM sweeps"), 1);
  for (const auto& [trial, steps] : acked_steps) {
    // Every acknowledged step is stored, once; a batch that was stored but not acknowledged
    // before the kill may add steps beyond, never duplicates (the primary key forbids them).
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
  std::printf(
      "crash test: %lld batches acknowledged before SIGKILL, %lld in all, %lld calls "
      "failed while the coordinator was down\n",
      static_cast<long long>(acked_at_kill), static_cast<long long>(acked_batches.load()),
      static_cast<long long>(failed_calls.load()));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace spheret
