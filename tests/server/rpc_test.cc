// The coordinator's gRPC server on 127.0.0.1:0 with in-process fake workers (plain stubs).
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <prometheus/exposer.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <future>
#include <limits>

#include "common/clock.h"
#include "common/sha256.h"
#include "net/channel_security.h"
#include "server/coordinator.h"
#include "server/rpc/server.h"
#include "spheret/v1/sweeps.grpc.pb.h"
#include "spheret/v1/workers.grpc.pb.h"
#include "tests/server/metrics_check.h"

namespace spheret {
namespace {

constexpr char kSweep[] = R"(name: rpc-test
dataset: fortunes
base: {scale: xs, max_iters: 40, eval_interval: 20}
parameters:
  method: {values: [pre_ln, geonorm]}
seeds: [1, 2]
)";

constexpr int64_t kTtl = 30'000;

class RpcTest : public testing::Test {
 protected:
  void SetUp() override { Start(/*require_tokens=*/false); }
  void TearDown() override {
    Stop();
    std::filesystem::remove_all(dir_);
  }

  void Start(bool require_tokens) {
    if (dir_.empty()) {
      dir_ = std::filesystem::temp_directory_path() /
             ("spheret_rpc_test_" + std::to_string(getpid()) + "_" +
              testing::UnitTest::GetInstance()->current_test_info()->name());
      std::filesystem::remove_all(dir_);
      std::filesystem::create_directories(dir_);
    }
    store_ = std::move(*store::OpenSqliteStore({(dir_ / "spheret.db").string()}));
    metrics_ = std::make_unique<metrics::CoordinatorMetrics>("test");
    CoordinatorOptions options;
    options.scheduler.lease_ttl_ms = kTtl;
    options.scheduler.backoff_base_ms = 1'000;
    options.housekeeping_interval_ms = 3'600'000;  // the test runs housekeeping itself
    coordinator_ = std::move(*Coordinator::Start(store_.get(), metrics_.get(), &clock_, options));
    rpc::ServerOptions server_options;
    server_options.listen = "127.0.0.1:0";
    server_options.require_tokens = require_tokens;
    auto server = rpc::CoordinatorServer::Start(coordinator_.get(), server_options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()),
                                   grpc::InsecureChannelCredentials());
    sweeps_ = v1::SweepService::NewStub(channel_);
    workers_ = v1::WorkerService::NewStub(channel_);
  }

  void Stop() {
    server_.reset();
    coordinator_.reset();
    store_.reset();
  }

  v1::SubmitSweepResponse Submit(const std::string& yaml = kSweep) {
    grpc::ClientContext context;
    v1::SubmitSweepRequest request;
    request.set_spec_yaml(yaml);
    v1::SubmitSweepResponse response;
    grpc::Status status = sweeps_->SubmitSweep(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  grpc::Status Register(const std::string& id, int slots) {
    grpc::ClientContext context;
    v1::RegisterRequest request;
    request.set_worker_id(id);
    request.set_host(id + ".test");
    request.set_cpu_slots(slots);
    v1::RegisterResponse response;
    return workers_->Register(&context, request, &response);
  }

  std::vector<v1::Lease> Acquire(const std::string& id, int free = 1, int port = 29500) {
    grpc::ClientContext context;
    v1::AcquireRequest request;
    request.set_worker_id(id);
    request.set_free_slots(free);
    request.set_rendezvous_port(port);
    v1::AcquireResponse response;
    grpc::Status status = workers_->Acquire(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return {response.leases().begin(), response.leases().end()};
  }

  grpc::Status Heartbeat(const std::string& id, std::vector<std::pair<int64_t, int>> running,
                         v1::HeartbeatResponse* response) {
    grpc::ClientContext context;
    v1::HeartbeatRequest request;
    request.set_worker_id(id);
    for (auto [trial, attempt] : running) {
      v1::RunningTrial* r = request.add_running();
      r->set_trial_id(trial);
      r->set_attempt(attempt);
    }
    return workers_->Heartbeat(&context, request, response);
  }

  grpc::Status Report(int64_t trial, int attempt, int first_step, int steps,
                      v1::ReportEventsResponse* response, bool with_diag = false) {
    grpc::ClientContext context;
    auto writer = workers_->ReportEvents(&context, response);
    v1::EventBatch batch;
    batch.set_trial_id(trial);
    batch.set_attempt(attempt);
    for (int step = first_step; step < first_step + steps; ++step) {
      v1::MetricRow* row = batch.add_metrics();
      row->set_name("train/loss");
      row->set_step(step);
      row->set_value(5.0 - 0.01 * step);
    }
    if (with_diag) {
      v1::Event* event = batch.add_other();
      event->set_json(
          R"({"type":"diag","step":0,"layer":1,"sublayer":"attn","hidden_norm":11.3,"theta":0.2})");
      event->mutable_diag()->set_layer(1);
      event->mutable_diag()->set_sublayer("attn");
      event->mutable_diag()->set_hidden_norm(11.3);
      event->mutable_diag()->set_theta(0.2);
    }
    writer->Write(batch);
    writer->WritesDone();
    return writer->Finish();
  }

  grpc::Status Finish(const std::string& worker, int64_t trial, int attempt, v1::TrialState outcome,
                      v1::FinishResponse* response) {
    grpc::ClientContext context;
    v1::FinishRequest request;
    request.set_worker_id(worker);
    request.set_trial_id(trial);
    request.set_attempt(attempt);
    request.set_outcome(outcome);
    return workers_->Finish(&context, request, response);
  }

  std::filesystem::path dir_;
  FakeClock clock_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<metrics::CoordinatorMetrics> metrics_;
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<rpc::CoordinatorServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::SweepService::Stub> sweeps_;
  std::unique_ptr<v1::WorkerService::Stub> workers_;
};

TEST_F(RpcTest, SubmittingTheSameSweepTwiceCreatesNoNewTrials) {
  v1::SubmitSweepResponse first = Submit();
  EXPECT_EQ(first.trial_count(), 4);
  EXPECT_EQ(first.created_trials(), 4);
  v1::SubmitSweepResponse second = Submit();
  EXPECT_EQ(second.sweep_id(), first.sweep_id());
  EXPECT_EQ(second.created_trials(), 0);
  grpc::ClientContext context;
  v1::ListTrialsRequest request;
  request.set_sweep_id(first.sweep_id());
  v1::ListTrialsResponse trials;
  ASSERT_TRUE(sweeps_->ListTrials(&context, request, &trials).ok());
  EXPECT_EQ(trials.trials_size(), 4);
}

TEST_F(RpcTest, DryRunsStoreNothingAndBadSpecsNameTheLine) {
  grpc::ClientContext dry_context;
  v1::SubmitSweepRequest dry;
  dry.set_spec_yaml(kSweep);
  dry.set_dry_run(true);
  v1::SubmitSweepResponse preview;
  ASSERT_TRUE(sweeps_->SubmitSweep(&dry_context, dry, &preview).ok());
  EXPECT_EQ(preview.configs_json_size(), 4);
  EXPECT_EQ(preview.sweep_id(), 0);
  grpc::ClientContext context;
  v1::SubmitSweepRequest bad;
  bad.set_spec_yaml("name: x\ndataset: d\nparameters:\n  metod: {values: [geonorm]}\n");
  v1::SubmitSweepResponse response;
  grpc::Status status = sweeps_->SubmitSweep(&context, bad, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("line 4: metod: unknown config key"), std::string::npos)
      << status.error_message();
  grpc::ClientContext list_context;
  v1::ListSweepsResponse sweeps;
  ASSERT_TRUE(sweeps_->ListSweeps(&list_context, v1::ListSweepsRequest(), &sweeps).ok());
  EXPECT_EQ(sweeps.sweeps_size(), 0);
}

TEST_F(RpcTest, SilentWorkerLosesItsLeaseAndStaleWritesAreRefused) {
  Submit("name: one\ndataset: d\nparameters: {method: {values: [geonorm]}}\n");
  ASSERT_TRUE(Register("a", 1).ok());
  ASSERT_TRUE(Register("b", 1).ok());
  std::vector<v1::Lease> first = Acquire("a");
  ASSERT_EQ(first.size(), 1u);
  const int64_t trial = first[0].trial_id();
  EXPECT_EQ(first[0].attempt(), 1);
  v1::ReportEventsResponse reported;
  ASSERT_TRUE(Report(trial, 1, 0, 10, &reported).ok());
  EXPECT_EQ(reported.metric_rows(), 10);
  // "a" goes silent; "b" keeps heartbeating.
  for (int i = 0; i < 7; ++i) {
    clock_.AdvanceMs(5'000);
    v1::HeartbeatResponse beat;
    ASSERT_TRUE(Heartbeat("b", {}, &beat).ok());
    coordinator_->Housekeeping();
  }
  clock_.AdvanceMs(1'000);  // past the back-off
  std::vector<v1::Lease> second = Acquire("b");
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].trial_id(), trial);
  EXPECT_EQ(second[0].attempt(), 2);
  // "a" wakes up: its writes are fenced off and it is told to stop.
  grpc::Status late = Report(trial, 1, 10, 5, &reported);
  EXPECT_EQ(late.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << late.error_message();
  v1::FinishResponse finished;
  EXPECT_EQ(Finish("a", trial, 1, v1::TRIAL_STATE_SUCCEEDED, &finished).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  v1::HeartbeatResponse beat;
  ASSERT_TRUE(Heartbeat("a", {{trial, 1}}, &beat).ok());
  ASSERT_EQ(beat.stop_size(), 1);
  EXPECT_EQ(beat.stop(0).attempt(), 1);
  // Attempt 2 carries on and finishes.
  ASSERT_TRUE(Report(trial, 2, 10, 5, &reported).ok());
  ASSERT_TRUE(Finish("b", trial, 2, v1::TRIAL_STATE_SUCCEEDED, &finished).ok());
  EXPECT_EQ(finished.state(), v1::TRIAL_STATE_SUCCEEDED);
  grpc::ClientContext context;
  v1::GetSweepRequest get;
  get.set_sweep_id(second[0].sweep_id());
  v1::Sweep sweep;
  ASSERT_TRUE(sweeps_->GetSweep(&context, get, &sweep).ok());
  EXPECT_EQ(sweep.state(), v1::SWEEP_STATE_DONE);
  EXPECT_EQ(sweep.trials_by_state().at("SUCCEEDED"), 1);
}

TEST_F(RpcTest, GangOfTwoWorkersGetsConsistentRendezvous) {
  Submit(
      "name: gang\ndataset: d\nparameters: {method: {values: [pre_ln]}}\n"
      "resources: {nodes: 2, cpu_slots: 1}\n");
  ASSERT_TRUE(Register("n0", 1).ok());
  ASSERT_TRUE(Register("n1", 1).ok());
  std::vector<v1::Lease> rank0 = Acquire("n0", 1, 41000);
  std::vector<v1::Lease> rank1 = Acquire("n1", 1, 42000);
  ASSERT_EQ(rank0.size(), 1u);
  ASSERT_EQ(rank1.size(), 1u);
  EXPECT_EQ(rank0[0].trial_id(), rank1[0].trial_id());
  EXPECT_EQ(rank0[0].config_json(), rank1[0].config_json());
  for (const v1::Lease* lease : {&rank0[0], &rank1[0]}) {
    EXPECT_EQ(lease->rendezvous().master_addr(), "n0.test");
    EXPECT_EQ(lease->rendezvous().master_port(), 41000) << "rank 0's free port";
    EXPECT_EQ(lease->rendezvous().world_size(), 2);
    EXPECT_EQ(lease->rendezvous().nodes(), 2);
  }
  EXPECT_EQ(rank0[0].rendezvous().node_rank(), 0);
  EXPECT_EQ(rank1[0].rendezvous().node_rank(), 1);
}

TEST_F(RpcTest, TokensAreCheckedByRole) {
  Stop();
  Start(/*require_tokens=*/true);
  ASSERT_TRUE(store_->CreateToken(Sha256Hex("reader-token"), "r", "read", "", 1).ok());
  ASSERT_TRUE(store_->CreateToken(Sha256Hex("worker-token"), "w", "worker", "w", 1).ok());
  auto call = [&](const char* token) {
    grpc::ClientContext context;
    if (token != nullptr) context.AddMetadata("authorization", std::string("Bearer ") + token);
    v1::SubmitSweepRequest request;
    request.set_spec_yaml(kSweep);
    v1::SubmitSweepResponse response;
    return sweeps_->SubmitSweep(&context, request, &response).error_code();
  };
  EXPECT_EQ(call(nullptr), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(call("made-up"), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(call("reader-token"), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(call("worker-token"), grpc::StatusCode::PERMISSION_DENIED);
  grpc::ClientContext context;
  context.AddMetadata("authorization", "Bearer worker-token");
  v1::RegisterRequest request;
  request.set_worker_id("w");
  request.set_cpu_slots(1);
  v1::RegisterResponse response;
  EXPECT_TRUE(workers_->Register(&context, request, &response).ok());
  EXPECT_EQ(response.lease_ttl_ms(), kTtl);
}

TEST_F(RpcTest, HealthCheckingIsOnWithoutATokenAndWatchStreamsToTheEnd) {
  // grpc.health.v1.Health/Check with an empty request; the answer {status: SERVING} encodes
  // as the two bytes 08 01 (no generated health stubs ship with Debian's gRPC).
  grpc::GenericStub generic(channel_);
  grpc::ClientContext health_context;
  grpc::Slice empty("");
  grpc::ByteBuffer health_request(&empty, 1), health;
  std::promise<grpc::Status> checked;
  generic.UnaryCall(&health_context, "/grpc.health.v1.Health/Check", grpc::StubOptions(),
                    &health_request, &health,
                    [&](grpc::Status status) { checked.set_value(status); });
  grpc::Status health_status = checked.get_future().get();
  ASSERT_TRUE(health_status.ok()) << health_status.error_message();
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(health.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& slice : slices)
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  EXPECT_EQ(bytes, std::string("\x08\x01", 2)) << "SERVING";

  const int64_t sweep =
      Submit("name: w\ndataset: d\nparameters: {method: {values: [pre_ln]}}\n").sweep_id();
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  v1::WatchSweepRequest request;
  request.set_sweep_id(sweep);
  auto reader = sweeps_->WatchSweep(&context, request);
  v1::WatchSweepEvent event;
  ASSERT_TRUE(reader->Read(&event));
  EXPECT_EQ(event.trial().state(), v1::TRIAL_STATE_PENDING);
  ASSERT_TRUE(Register("a", 1).ok());
  const int64_t trial = Acquire("a")[0].trial_id();
  ASSERT_TRUE(reader->Read(&event));
  EXPECT_EQ(event.trial().state(), v1::TRIAL_STATE_RUNNING);
  v1::ReportEventsResponse reported;
  ASSERT_TRUE(Report(trial, 1, 0, 3, &reported).ok());
  ASSERT_TRUE(reader->Read(&event));
  ASSERT_EQ(event.trial().latest_size(), 1);
  EXPECT_EQ(event.trial().latest(0).step(), 2);
  v1::FinishResponse finished;
  ASSERT_TRUE(Finish("a", trial, 1, v1::TRIAL_STATE_SUCCEEDED, &finished).ok());
  ASSERT_TRUE(reader->Read(&event));
  EXPECT_EQ(event.trial().state(), v1::TRIAL_STATE_SUCCEEDED);
  EXPECT_FALSE(reader->Read(&event)) << "the stream ends with the sweep";
  EXPECT_TRUE(reader->Finish().ok());
}

TEST_F(RpcTest, ListsPageAndFilterCancelStopsAndResultsSummarize) {
  const int64_t sweep = Submit().sweep_id();  // 4 trials
  ASSERT_TRUE(Register("a", 1).ok());
  const int64_t running = Acquire("a")[0].trial_id();
  v1::ReportEventsResponse reported;
  ASSERT_TRUE(Report(running, 1, 0, 4, &reported).ok());
  std::vector<int64_t> seen;
  int64_t token = 0;
  do {
    grpc::ClientContext context;
    v1::ListTrialsRequest request;
    request.set_sweep_id(sweep);
    request.set_page_size(3);
    request.set_page_token(token);
    v1::ListTrialsResponse page;
    ASSERT_TRUE(sweeps_->ListTrials(&context, request, &page).ok());
    EXPECT_LE(page.trials_size(), 3);
    for (const v1::Trial& trial : page.trials()) seen.push_back(trial.trial_id());
    token = page.next_page_token();
  } while (token != 0);
  EXPECT_EQ(seen.size(), 4u);
  {
    grpc::ClientContext context;
    v1::ListTrialsRequest request;
    request.set_sweep_id(sweep);
    request.add_states(v1::TRIAL_STATE_RUNNING);
    v1::ListTrialsResponse page;
    ASSERT_TRUE(sweeps_->ListTrials(&context, request, &page).ok());
    ASSERT_EQ(page.trials_size(), 1);
    EXPECT_EQ(page.trials(0).trial_id(), running);
    ASSERT_EQ(page.trials(0).latest_size(), 1);
    EXPECT_EQ(page.trials(0).latest(0).name(), "train/loss");
    EXPECT_EQ(page.trials(0).latest(0).step(), 3);
  }
  {
    grpc::ClientContext context;
    v1::QueryResultsRequest request;
    request.set_sweep_id(sweep);
    request.add_metrics("train/loss");
    v1::QueryResultsResponse results;
    ASSERT_TRUE(sweeps_->QueryResults(&context, request, &results).ok());
    ASSERT_EQ(results.rows_size(), 4);
    int with_loss = 0;
    for (const v1::ResultRow& row : results.rows()) {
      if (row.metrics().count("train/loss") == 0) continue;
      ++with_loss;
      EXPECT_EQ(row.metrics().at("train/loss").count(), 4);
      EXPECT_DOUBLE_EQ(row.metrics().at("train/loss").min(), 5.0 - 0.03);
    }
    EXPECT_EQ(with_loss, 1);
  }
  grpc::ClientContext context;
  v1::CancelSweepRequest cancel;
  cancel.set_sweep_id(sweep);
  v1::CancelResponse cancelled;
  ASSERT_TRUE(sweeps_->CancelSweep(&context, cancel, &cancelled).ok());
  EXPECT_EQ(cancelled.cancelled_pending(), 3);
  EXPECT_EQ(cancelled.stopping_running(), 1);
  v1::HeartbeatResponse beat;
  ASSERT_TRUE(Heartbeat("a", {{running, 1}}, &beat).ok());
  ASSERT_EQ(beat.stop_size(), 1) << "the running trial stops on the next heartbeat";
  v1::FinishResponse finished;
  ASSERT_TRUE(Finish("a", running, 1, v1::TRIAL_STATE_FAILED, &finished).ok());
  EXPECT_EQ(finished.state(), v1::TRIAL_STATE_CANCELLED);
}

TEST(ServerOptionsTest, NonLoopbackNeedsTlsAndTokensUnlessInsecure) {
  rpc::ServerOptions local;
  local.listen = "127.0.0.1:7070";
  EXPECT_TRUE(rpc::ValidateServerOptions(&local).ok());
  EXPECT_FALSE(local.require_tokens);
  rpc::ServerOptions open;
  open.listen = "0.0.0.0:7070";
  absl::Status refused = rpc::ValidateServerOptions(&open);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("--tls-cert"), absl::string_view::npos) << refused;
  rpc::ServerOptions tls = open;
  tls.tls_cert_file = "cert.pem";
  tls.tls_key_file = "key.pem";
  EXPECT_TRUE(rpc::ValidateServerOptions(&tls).ok());
  EXPECT_TRUE(tls.require_tokens) << "TLS on a public address comes with tokens";
  rpc::ServerOptions insecure = open;
  insecure.insecure = true;
  EXPECT_TRUE(rpc::ValidateServerOptions(&insecure).ok());
  // Issue 11, item 12: --insecure waived TLS and tokens both; now only TLS.
  EXPECT_TRUE(insecure.require_tokens) << "--insecure leaves tokens on";
  rpc::ServerOptions trusted = open;
  trusted.insecure = trusted.no_tokens = true;
  EXPECT_TRUE(rpc::ValidateServerOptions(&trusted).ok());
  EXPECT_FALSE(trusted.require_tokens) << "only --no-tokens turns them off";
  rpc::ServerOptions half = tls;
  half.tls_key_file.clear();
  EXPECT_FALSE(rpc::ValidateServerOptions(&half).ok());
}

// Issue 11, item 12: worker identity was self-declared, so any worker token could report into or
// finish another worker's trial. A worker token speaks for its one worker id, and touches only
// the leases that worker holds.
TEST_F(RpcTest, SecurityAcrossHostsAWorkerTokenTouchesOnlyItsOwnLeases) {
  Stop();
  Start(/*require_tokens=*/true);
  ASSERT_TRUE(store_->CreateToken(Sha256Hex("admin-token"), "admin", "admin", "", 1).ok());
  ASSERT_TRUE(store_->CreateToken(Sha256Hex("a-token"), "a", "worker", "a", 1).ok());
  ASSERT_TRUE(store_->CreateToken(Sha256Hex("b-token"), "b", "worker", "b", 1).ok());
  const auto as = [](const char* token) {
    auto context = std::make_unique<grpc::ClientContext>();
    context->AddMetadata("authorization", std::string("Bearer ") + token);
    return context;
  };
  v1::SubmitSweepRequest submit;
  submit.set_spec_yaml(kSweep);
  v1::SubmitSweepResponse submitted;
  ASSERT_TRUE(sweeps_->SubmitSweep(as("admin-token").get(), submit, &submitted).ok());
  const auto register_as = [&](const char* token, const std::string& id) {
    v1::RegisterRequest request;
    request.set_worker_id(id);
    request.set_cpu_slots(1);
    v1::RegisterResponse response;
    return workers_->Register(as(token).get(), request, &response);
  };
  const grpc::Status impostor = register_as("b-token", "a");
  EXPECT_EQ(impostor.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(impostor.error_message(), "this token speaks for worker 'b', not 'a'");
  ASSERT_TRUE(register_as("a-token", "a").ok());
  ASSERT_TRUE(register_as("b-token", "b").ok());
  v1::AcquireRequest acquire;
  acquire.set_worker_id("a");
  acquire.set_free_slots(1);
  v1::AcquireResponse leases;
  ASSERT_TRUE(workers_->Acquire(as("a-token").get(), acquire, &leases).ok());
  ASSERT_EQ(leases.leases_size(), 1);
  const int64_t trial = leases.leases(0).trial_id();

  const auto report_as = [&](const char* token) {
    v1::ReportEventsResponse response;
    auto context = as(token);
    auto writer = workers_->ReportEvents(context.get(), &response);
    v1::EventBatch batch;
    batch.set_trial_id(trial);
    batch.set_attempt(1);
    v1::MetricRow* row = batch.add_metrics();
    row->set_name("train/loss");
    row->set_value(1.0);
    writer->Write(batch);
    writer->WritesDone();
    return writer->Finish();
  };
  const grpc::Status foreign = report_as("b-token");
  EXPECT_EQ(foreign.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(foreign.error_message(),
            "worker 'b' holds no lease on trial " + std::to_string(trial));
  EXPECT_TRUE(report_as("a-token").ok());

  const auto finish_as = [&](const char* token, const std::string& id) {
    v1::FinishRequest request;
    request.set_worker_id(id);
    request.set_trial_id(trial);
    request.set_attempt(1);
    request.set_outcome(v1::TRIAL_STATE_SUCCEEDED);
    v1::FinishResponse response;
    return workers_->Finish(as(token).get(), request, &response).error_code();
  };
  EXPECT_EQ(finish_as("b-token", "a"), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(finish_as("b-token", "b"), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(finish_as("a-token", "a"), grpc::StatusCode::OK);
}

// Issue 11, item 12: loopback detection matched prefixes, so a name like 127.0.0.1.example.org
// (which resolves anywhere) counted as loopback and went without TLS or tokens.
TEST(ServerOptionsTest, SecurityAcrossHostsLoopbackDetectionParsesAddresses) {
  for (const char* loopback : {"127.0.0.1:7070", "127.4.5.6:1", "[::1]:7070", "localhost:1",
                               "[::ffff:127.0.0.1]:9"}) {
    EXPECT_TRUE(net::IsLoopback(loopback)) << loopback;
  }
  for (const char* remote :
       {"127.0.0.1.example.org:7070", "127.evil:80", "localhost.example.org:1", "10.0.0.1:7070",
        "0.0.0.0:7070", "[::]:7070", "[::ffff:10.0.0.1]:9", "1270.0.0.1:1", ":7070"}) {
    EXPECT_FALSE(net::IsLoopback(remote)) << remote;
  }
  rpc::ServerOptions lookalike;
  lookalike.listen = "127.0.0.1.example.org:7070";
  EXPECT_EQ(rpc::ValidateServerOptions(&lookalike).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(RpcTest, MetricsPassPromtoolAndTrialGaugesLiveOnlyWhileRunning) {
  prometheus::Exposer exposer("127.0.0.1:0");
  exposer.RegisterCollectable(metrics_->registry());
  const int port = exposer.GetListeningPorts().front();
  const int64_t sweep = Submit().sweep_id();
  ASSERT_GT(sweep, 0);
  ASSERT_TRUE(Register("a", 2).ok());
  std::vector<v1::Lease> leases = Acquire("a", 2);
  ASSERT_EQ(leases.size(), 1u);
  v1::ReportEventsResponse reported;
  ASSERT_TRUE(Report(leases[0].trial_id(), 1, 0, 5, &reported, /*with_diag=*/true).ok());
  coordinator_->Housekeeping();
  const std::string text = testing_util::FetchMetrics(port);
  for (const char* family :
       {"spheret_trials{state=\"RUNNING\"} 1", "spheret_queue_depth 3", "spheret_workers{",
        "spheret_slots{state=\"busy\"} 1", "spheret_schedule_latency_seconds_bucket",
        "spheret_lease_expirations_total", "spheret_metric_rows_ingested_total 5",
        "spheret_db_commit_seconds_count", "spheret_build_info{", "spheret_train_loss{",
        "spheret_hidden_norm{", "spheret_rotation_angle_radians{"}) {
    EXPECT_NE(text.find(family), std::string::npos) << family << " missing from\n" << text;
  }
  std::string verdict;
  EXPECT_EQ(testing_util::PromtoolCheck(text, (dir_ / "metrics.txt").string(), &verdict), 0)
      << "promtool check metrics:\n"
      << verdict;
  v1::FinishResponse finished;
  ASSERT_TRUE(Finish("a", leases[0].trial_id(), 1, v1::TRIAL_STATE_SUCCEEDED, &finished).ok());
  EXPECT_EQ(testing_util::FetchMetrics(port).find("spheret_train_loss{"), std::string::npos)
      << "a trial's live gauges go when it ends";
}

// Issue 11, item 5: a NaN in a diag event (JSON null) made the coordinator throw after the batch
// had committed, and the worker retried that batch forever; `{"type":1}` aborted the writer
// thread. Now non-finite values are stored as NULL with their step kept, no event line is parsed
// by the coordinator, and the batches after such a one flow on to the trial's end.
TEST_F(RpcTest, NonFiniteNumbersAndMalformedEventsNeitherWedgeNorAbort) {
  const int64_t sweep = Submit().sweep_id();
  ASSERT_GT(sweep, 0);
  ASSERT_TRUE(Register("a", 1).ok());
  std::vector<v1::Lease> leases = Acquire("a", 1);
  ASSERT_EQ(leases.size(), 1u);
  const int64_t trial = leases[0].trial_id();
  {
    grpc::ClientContext context;
    v1::ReportEventsResponse response;
    auto writer = workers_->ReportEvents(&context, &response);
    v1::EventBatch batch;
    batch.set_trial_id(trial);
    batch.set_attempt(1);
    const double values[] = {2.5, std::nan(""), std::numeric_limits<double>::infinity(), 2.4};
    for (int step = 0; step < 4; ++step) {
      v1::MetricRow* row = batch.add_metrics();
      row->set_name("train/loss");
      row->set_step(step);
      row->set_value(values[step]);
    }
    v1::Event* diag = batch.add_other();
    diag->set_seq(1);
    diag->set_json(R"({"type":"diag","step":1,"layer":1,"sublayer":"attn","hidden_norm":null})");
    diag->mutable_diag()->set_step(1);
    diag->mutable_diag()->set_layer(1);
    diag->mutable_diag()->set_sublayer("attn");
    diag->mutable_diag()->set_hidden_norm(std::nan(""));
    diag->mutable_diag()->set_theta(std::nan(""));
    v1::Event* odd = batch.add_other();  // stored as text, never parsed
    odd->set_seq(2);
    odd->set_json(R"({"type":1})");
    v1::Event* eval = batch.add_other();
    eval->set_seq(3);
    eval->set_json(R"({"type":"eval","task":"piqa","metric":"acc","value":0.6,"std_error":null})");
    eval->mutable_eval()->set_task("piqa");
    eval->mutable_eval()->set_metric("acc");
    eval->mutable_eval()->set_value(0.6);
    eval->mutable_eval()->set_std_error(std::nan(""));
    ASSERT_TRUE(writer->Write(batch));
    writer->WritesDone();
    const grpc::Status status = writer->Finish();
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.metric_rows(), 4);
  }
  v1::ReportEventsResponse later;
  ASSERT_TRUE(Report(trial, 1, 4, 3, &later).ok()) << "the batch after flows";
  EXPECT_EQ(later.metric_rows(), 3);
  v1::FinishResponse finished;
  ASSERT_TRUE(Finish("a", trial, 1, v1::TRIAL_STATE_SUCCEEDED, &finished).ok());
  EXPECT_EQ(finished.state(), v1::TRIAL_STATE_SUCCEEDED);

  absl::StatusOr<CurveRecord> curve = store_->Curve(trial, "train/loss");
  ASSERT_TRUE(curve.ok()) << curve.status();
  ASSERT_EQ(curve->steps, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(curve->values[0], 2.5);
  EXPECT_TRUE(std::isnan(curve->values[1])) << "NaN stored as NULL, step kept";
  EXPECT_TRUE(std::isnan(curve->values[2])) << "inf stored as NULL, step kept";
  EXPECT_EQ(curve->values[3], 2.4);
  absl::StatusOr<std::vector<EventRecord>> events = store_->Events(trial, 10);
  ASSERT_TRUE(events.ok());
  EXPECT_EQ(events->size(), 3u);
  absl::StatusOr<std::vector<EvalRecord>> evals = store_->Evals(trial);
  ASSERT_TRUE(evals.ok());
  ASSERT_EQ(evals->size(), 1u);
  EXPECT_EQ(evals->front().value, 0.6);
  EXPECT_TRUE(std::isnan(evals->front().stderr_value));
}

// Issue 11, item 9: what one caller may declare or hold is bounded. Register refuses absurd slot
// counts (2^31 slots allocated gigabytes on every stats pass), QueryResults refuses sweep 0 (the
// whole database), no request above 4 MiB is read (it was 64 MiB, before the token check), and
// WatchSweep streams are capped.
TEST_F(RpcTest, ResourceBoundsRegisterResultsRequestSizeAndWatchers) {
  EXPECT_EQ(Register("huge", 2147483647).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Register("none", 0).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  ASSERT_TRUE(Register("a", 4096).ok()) << "the largest slot count allowed";
  const int64_t sweep = Submit().sweep_id();
  coordinator_->Housekeeping();  // the stats pass walks the slots

  {
    grpc::ClientContext context;
    v1::QueryResultsRequest request;
    v1::QueryResultsResponse response;
    EXPECT_EQ(sweeps_->QueryResults(&context, request, &response).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
  {
    grpc::ClientContext context;
    v1::SubmitSweepRequest request;
    request.set_spec_yaml(std::string(5 << 20, '#'));
    v1::SubmitSweepResponse response;
    EXPECT_EQ(sweeps_->SubmitSweep(&context, request, &response).error_code(),
              grpc::StatusCode::RESOURCE_EXHAUSTED);
  }

  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReader<v1::WatchSweepEvent>>> readers;
  v1::WatchSweepRequest request;
  request.set_sweep_id(sweep);
  v1::WatchSweepEvent event;
  for (int i = 0; i <= rpc::kMaxWatchers; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    contexts.back()->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    readers.push_back(sweeps_->WatchSweep(contexts.back().get(), request));
    if (i < rpc::kMaxWatchers) {
      ASSERT_TRUE(readers.back()->Read(&event)) << "watcher " << i;
    }
  }
  EXPECT_FALSE(readers.back()->Read(&event));
  EXPECT_EQ(readers.back()->Finish().error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  for (size_t i = 0; i + 1 < contexts.size(); ++i) contexts[i]->TryCancel();
  for (size_t i = 0; i + 1 < readers.size(); ++i) readers[i]->Finish();
}

}  // namespace
}  // namespace spheret
