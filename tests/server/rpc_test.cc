// The coordinator's gRPC server on 127.0.0.1:0 with in-process fake workers (plain stubs).
#include "tests/server/rpc_fixture.h"

namespace spheret {
namespace {

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
  v1::IngestEventsResponse reported;
  ASSERT_TRUE(SendEvents(trial, 1, 0, 10, &reported).ok());
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
  grpc::Status late = SendEvents(trial, 1, 10, 5, &reported);
  EXPECT_EQ(late.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << late.error_message();
  v1::FinishResponse finished;
  EXPECT_EQ(Finish("a", trial, 1, v1::TRIAL_STATE_SUCCEEDED, &finished).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  v1::HeartbeatResponse beat;
  ASSERT_TRUE(Heartbeat("a", {{trial, 1}}, &beat).ok());
  ASSERT_EQ(beat.stop_size(), 1);
  EXPECT_EQ(beat.stop(0).attempt(), 1);
  // Attempt 2 carries on and finishes.
  ASSERT_TRUE(SendEvents(trial, 2, 10, 5, &reported).ok());
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
  ASSERT_TRUE(store_->CreateToken(Sha256Hex("reader-token"), "r", Role::kRead, "", 1).ok());
  ASSERT_TRUE(store_->CreateToken(Sha256Hex("worker-token"), "w", Role::kWorker, "w", 1).ok());
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
  v1::IngestEventsResponse reported;
  ASSERT_TRUE(SendEvents(trial, 1, 0, 3, &reported).ok());
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

// Every trial id of `sweep`, listed `page_size` at a time (each page checked for its size).
std::vector<int64_t> TrialIdsByPages(v1::SweepService::Stub& sweeps, int64_t sweep, int page_size) {
  std::vector<int64_t> seen;
  int64_t token = 0;
  do {
    grpc::ClientContext context;
    v1::ListTrialsRequest request;
    request.set_sweep_id(sweep);
    request.set_page_size(page_size);
    request.set_page_token(token);
    v1::ListTrialsResponse page;
    EXPECT_TRUE(sweeps.ListTrials(&context, request, &page).ok());
    EXPECT_LE(page.trials_size(), page_size);
    for (const v1::Trial& trial : page.trials()) seen.push_back(trial.trial_id());
    token = page.next_page_token();
  } while (token != 0);
  return seen;
}

// QueryResults of the sweep: its 4 trials, one of them with 4 train/loss rows (the least 4.97).
void ExpectResultsSummarizeTheLoss(v1::SweepService::Stub& sweeps, int64_t sweep) {
  grpc::ClientContext context;
  v1::QueryResultsRequest request;
  request.set_sweep_id(sweep);
  request.add_metrics("train/loss");
  v1::QueryResultsResponse results;
  ASSERT_TRUE(sweeps.QueryResults(&context, request, &results).ok());
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

TEST_F(RpcTest, ListsPageAndFilterCancelStopsAndResultsSummarize) {
  const int64_t sweep = Submit().sweep_id();  // 4 trials
  ASSERT_TRUE(Register("a", 1).ok());
  const int64_t running = Acquire("a")[0].trial_id();
  v1::IngestEventsResponse reported;
  ASSERT_TRUE(SendEvents(running, 1, 0, 4, &reported).ok());
  EXPECT_EQ(TrialIdsByPages(*sweeps_, sweep, 3).size(), 4u);
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
  ExpectResultsSummarizeTheLoss(*sweeps_, sweep);
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

}  // namespace
}  // namespace spheret

namespace spheret {
namespace {

// One typed road: per-layer values stream back by field name, a series per (layer, sublayer),
// filtered by sublayer; a field that is not a plain name is refused.
TEST_F(RpcTest, LayerValuesStreamBackByField) {
  const int64_t sweep = Submit().sweep_id();
  ASSERT_TRUE(Register("a", 1).ok());
  std::vector<v1::Lease> leases = Acquire("a", 1);
  ASSERT_EQ(leases.size(), 1u);
  v1::IngestEventsResponse reported;
  ASSERT_TRUE(SendEvents(leases[0].trial_id(), 1, 0, 2, &reported, /*with_diag=*/true).ok());
  const auto stream = [&](const std::string& field, const std::string& sublayer,
                          std::vector<v1::LayerValues>* out) {
    grpc::ClientContext context;
    v1::StreamLayerValuesRequest request;
    request.set_sweep_id(sweep);
    request.set_field(field);
    request.set_sublayer(sublayer);
    auto reader = sweeps_->StreamLayerValues(&context, request);
    for (v1::LayerValues values; reader->Read(&values);) out->push_back(values);
    return reader->Finish();
  };
  std::vector<v1::LayerValues> found;
  ASSERT_TRUE(stream("token_cos", "", &found).ok());
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].trial_id(), leases[0].trial_id());
  ASSERT_EQ(found[0].series_size(), 1);
  EXPECT_EQ(found[0].series(0).layer(), 1);
  EXPECT_EQ(found[0].series(0).sublayer(), "attn");
  ASSERT_EQ(found[0].series(0).values_size(), 1);
  EXPECT_EQ(found[0].series(0).values(0), 0.4);
  found.clear();
  ASSERT_TRUE(stream("token_cos", "mlp", &found).ok());
  EXPECT_TRUE(found.empty()) << "no mlp row";
  EXPECT_EQ(stream("diag/token_cos/1/attn", "", &found).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(stream("token_cos", "ffn", &found).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

}  // namespace
}  // namespace spheret
