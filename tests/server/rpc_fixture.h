// The fixture of rpc_test.cc and rpc_security_test.cc: a coordinator and its server in-process.
// The coordinator's gRPC server on 127.0.0.1:0 with in-process fake workers (plain stubs).
#pragma once

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <prometheus/exposer.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <future>
#include <limits>

#include "base/clock.h"
#include "base/sha256.h"
#include "net/channel_security.h"
#include "server/coordinator.h"
#include "server/rpc/server.h"
#include "spheret/v1/sweeps.grpc.pb.h"
#include "spheret/v1/workers.grpc.pb.h"
#include "tests/server/metrics_check.h"

namespace spheret {

inline constexpr char kSweep[] = R"(name: rpc-test
dataset: fortunes
base: {scale: xs, max_iters: 40, eval_interval: 20}
parameters:
  method: {values: [pre_ln, geonorm]}
seeds: [1, 2]
)";

inline constexpr int64_t kTtl = 30'000;

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
    options.limits.max_trials = max_trials_;
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
      v1::AttemptId* r = request.add_running();
      r->set_trial_id(trial);
      r->set_attempt(attempt);
    }
    return workers_->Heartbeat(&context, request, response);
  }

  grpc::Status SendEvents(int64_t trial, int attempt, int first_step, int steps,
                          v1::IngestEventsResponse* response, bool with_diag = false) {
    grpc::ClientContext context;
    auto writer = workers_->IngestEvents(&context, response);
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
      v1::DiagRow* diag = batch.add_diags();
      diag->set_layer(1);
      diag->set_sublayer("attn");
      for (const auto& [field, value] : {std::pair<const char*, double>{"hidden_norm", 11.3},
                                         {"theta", 0.2},
                                         {"token_cos", 0.4}}) {
        v1::DiagValue* out = diag->add_values();
        out->set_field(field);
        out->set_value(value);
      }
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
  int64_t max_trials_ = SweepLimits().max_trials;  // set before SetUp to change the grid limit
  FakeClock clock_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<metrics::CoordinatorMetrics> metrics_;
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<rpc::CoordinatorServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::SweepService::Stub> sweeps_;
  std::unique_ptr<v1::WorkerService::Stub> workers_;
};

}  // namespace spheret
