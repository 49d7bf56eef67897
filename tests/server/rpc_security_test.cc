// The coordinator's gRPC server on 127.0.0.1:0: security, metrics, malformed input, resource
// bounds.
#include "absl/strings/ascii.h"
#include "absl/strings/strip.h"
#include "server/metrics/metrics.h"
#include "tests/server/layer_query.h"
#include "tests/server/rpc_fixture.h"

namespace spheret {
namespace {

using store::ByField;

// A call context carrying `token`.
std::unique_ptr<grpc::ClientContext> As(const char* token) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->AddMetadata("authorization", std::string("Bearer ") + token);
  return context;
}

// One metric row of attempt 1 of `trial`, sent with `token`.
grpc::Status SendOneRow(v1::WorkerService::Stub& workers, const char* token, int64_t trial) {
  v1::IngestEventsResponse response;
  auto context = As(token);
  auto writer = workers.IngestEvents(context.get(), &response);
  v1::EventBatch batch;
  batch.set_trial_id(trial);
  batch.set_attempt(1);
  v1::MetricRow* row = batch.add_metrics();
  row->set_name("train/loss");
  row->set_value(1.0);
  writer->Write(batch);
  writer->WritesDone();
  return writer->Finish();
}

// Attempt 1 of `trial` finished as SUCCEEDED by worker `id`, with `token`.
grpc::Status FinishAs(v1::WorkerService::Stub& workers, const char* token, const std::string& id,
                      int64_t trial) {
  v1::FinishRequest request;
  request.set_worker_id(id);
  request.set_trial_id(trial);
  request.set_attempt(1);
  request.set_outcome(v1::TRIAL_STATE_SUCCEEDED);
  v1::FinishResponse response;
  return workers.Finish(As(token).get(), request, &response);
}

// The API's roles (v1::Role, which the CLI lists) and the coordinator's (Role, as stored) are the
// same four names.
TEST(RoleTest, TheApiAndTheCoordinatorKnowTheSameRoles) {
  int api_roles = 0;
  for (int value = v1::Role_MIN; value <= v1::Role_MAX; ++value) {
    if (!v1::Role_IsValid(value) || value == v1::ROLE_UNSPECIFIED) continue;
    ++api_roles;
    const std::string name = absl::AsciiStrToLower(
        absl::StripPrefix(v1::Role_Name(static_cast<v1::Role>(value)), "ROLE_"));
    absl::StatusOr<Role> role = ParseRole(name);
    ASSERT_TRUE(role.ok()) << name;
    EXPECT_EQ(RoleName(*role), name);
  }
  EXPECT_EQ(api_roles, 4);
  EXPECT_EQ(ParseRole("root").status().message(),
            "role must be admin, submit, read or worker, got 'root'");
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
  ASSERT_TRUE(store_->CreateToken(Sha256Hex("admin-token"), "admin", Role::kAdmin, "", 1).ok());
  ASSERT_TRUE(store_->CreateToken(Sha256Hex("a-token"), "a", Role::kWorker, "a", 1).ok());
  ASSERT_TRUE(store_->CreateToken(Sha256Hex("b-token"), "b", Role::kWorker, "b", 1).ok());
  v1::SubmitSweepRequest submit;
  submit.set_spec_yaml(kSweep);
  v1::SubmitSweepResponse submitted;
  ASSERT_TRUE(sweeps_->SubmitSweep(As("admin-token").get(), submit, &submitted).ok());
  const auto register_as = [&](const char* token, const std::string& id) {
    v1::RegisterRequest request;
    request.set_worker_id(id);
    request.set_cpu_slots(1);
    v1::RegisterResponse response;
    return workers_->Register(As(token).get(), request, &response);
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
  ASSERT_TRUE(workers_->Acquire(As("a-token").get(), acquire, &leases).ok());
  ASSERT_EQ(leases.leases_size(), 1);
  const int64_t trial = leases.leases(0).trial_id();

  const auto report_as = [&](const char* token) { return SendOneRow(*workers_, token, trial); };
  const grpc::Status foreign = report_as("b-token");
  EXPECT_EQ(foreign.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(foreign.error_message(), "worker 'b' holds no lease on trial " + std::to_string(trial));
  EXPECT_TRUE(report_as("a-token").ok());

  const auto finish_as = [&](const char* token, const std::string& id) {
    return FinishAs(*workers_, token, id, trial).error_code();
  };
  EXPECT_EQ(finish_as("b-token", "a"), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(finish_as("b-token", "b"), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(finish_as("a-token", "a"), grpc::StatusCode::OK);
}

// Issue 11, item 12: loopback detection matched prefixes, so a name like 127.0.0.1.example.org
// (which resolves anywhere) counted as loopback and went without TLS or tokens.
TEST(ServerOptionsTest, SecurityAcrossHostsLoopbackDetectionParsesAddresses) {
  for (const char* loopback :
       {"127.0.0.1:7070", "127.4.5.6:1", "[::1]:7070", "localhost:1", "[::ffff:127.0.0.1]:9"}) {
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
  v1::IngestEventsResponse reported;
  ASSERT_TRUE(SendEvents(leases[0].trial_id(), 1, 0, 5, &reported, /*with_diag=*/true).ok());
  coordinator_->Housekeeping();
  const std::string text = testing_util::FetchMetrics(port);
  for (const char* family :
       {"spheret_trials{state=\"RUNNING\"} 1", "spheret_queue_depth 3", "spheret_workers{",
        "spheret_slots{state=\"busy\"} 1", "spheret_schedule_latency_seconds_bucket",
        "spheret_lease_expirations_total", "spheret_metric_rows_ingested_total 5",
        "spheret_db_commit_seconds_count", "spheret_build_info{", "spheret_train_loss{",
        "spheret_hidden_norm{", "spheret_rotation_angle_radians{",
        "spheret_layer_value{field=\"token_cos\",layer=\"1\"",
        "spheret_layer_values_unexported_total{reason=\"layer\"} 0"}) {
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

// Issue 26: every per-layer value reaches Prometheus by its field through one family,
// spheret_layer_value{layer, sublayer, field}, in O(1) per value; hidden_norm and theta also
// through the families of earlier versions. A field off the exported list or a layer beyond the
// trial's depth makes no series (it is counted), so a trainer cannot grow the label set.
TEST(CoordinatorMetricsTest, LayerValuesByFieldWithinTheTrialsDepth) {
  metrics::CoordinatorMetrics metrics("test");
  prometheus::Exposer exposer("127.0.0.1:0");
  exposer.RegisterCollectable(metrics.registry());
  const metrics::TrialLabels labels = {{"sweep", "s"}, {"method", "autonorm"}, {"trial", "7"}};
  metrics.TrialLayerValues(7, labels, 4, 3, "attn",
                           {{"gate_choice", 2}, {"hidden_norm", 11.3}, {"theta", 0.25}});
  metrics.TrialLayerValues(7, labels, 4, 2, "mlp", {{"jac_sigma_max", 41.5}});
  metrics.TrialLayerValues(7, labels, 4, 2, "mlp", {{"jac_sigma_max", 42.5}});  // updated
  metrics.TrialLayerValues(7, labels, 4, 5, "attn", {{"gate_choice", 1}});      // beyond 4
  metrics.TrialLayerValues(7, labels, 4, 4, "mlp", {{"made_up", 0.9}});
  const std::string text = testing_util::FetchMetrics(exposer.GetListeningPorts().front());
  EXPECT_NE(text.find(R"(spheret_layer_value{field="gate_choice",layer="3",method="autonorm",)"
                      R"(sublayer="attn",sweep="s",trial="7"} 2)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(R"(field="jac_sigma_max",layer="2")"), std::string::npos) << text;
  EXPECT_NE(text.find("42.5"), std::string::npos) << text;
  EXPECT_EQ(text.find("41.5"), std::string::npos) << "one series per (layer, sublayer, field)";
  EXPECT_NE(text.find(R"(spheret_hidden_norm{layer="3",method="autonorm",sublayer="attn",)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(R"(spheret_rotation_angle_radians{layer="3")"), std::string::npos) << text;
  EXPECT_EQ(text.find(R"(layer="5")"), std::string::npos) << text;
  EXPECT_EQ(text.find("made_up"), std::string::npos) << text;
  EXPECT_NE(text.find(R"(spheret_layer_values_unexported_total{reason="field"} 1)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(R"(spheret_layer_values_unexported_total{reason="layer"} 1)"),
            std::string::npos)
      << text;
  metrics.TrialEnded(7);
  const std::string after = testing_util::FetchMetrics(exposer.GetListeningPorts().front());
  for (const char* family :
       {"spheret_layer_value{", "spheret_hidden_norm{", "spheret_rotation_angle_radians{"}) {
    EXPECT_EQ(after.find(family), std::string::npos) << family;
  }
}

// Issue 11, item 5: a NaN in a diag event (JSON null) made the coordinator throw after the batch
// had committed, and the worker retried that batch forever; `{"type":1}` aborted the writer
// thread. Now non-finite values are stored as NULL with their step kept, no event line is parsed
// by the coordinator, and the batches after such a one flow on to the trial's end.
// Four train/loss rows (NaN and inf among them), a diag with NaN fields, an event of no known
// type and an eval without a standard error, for attempt 1 of `trial`.
v1::EventBatch NonFiniteBatch(int64_t trial) {
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
  v1::DiagRow* diag = batch.add_diags();
  diag->set_step(1);
  diag->set_layer(1);
  diag->set_sublayer("attn");
  for (const char* field : {"hidden_norm", "theta"}) {
    v1::DiagValue* value = diag->add_values();
    value->set_field(field);
    value->set_value(std::nan(""));
  }
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
  return batch;
}

TEST_F(RpcTest, NonFiniteNumbersAndMalformedEventsNeitherWedgeNorAbort) {
  const int64_t sweep = Submit().sweep_id();
  ASSERT_GT(sweep, 0);
  ASSERT_TRUE(Register("a", 1).ok());
  std::vector<v1::Lease> leases = Acquire("a", 1);
  ASSERT_EQ(leases.size(), 1u);
  const int64_t trial = leases[0].trial_id();
  {
    grpc::ClientContext context;
    v1::IngestEventsResponse response;
    auto writer = workers_->IngestEvents(&context, &response);
    ASSERT_TRUE(writer->Write(NonFiniteBatch(trial)));
    writer->WritesDone();
    const grpc::Status status = writer->Finish();
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.metric_rows(), 4);
  }
  v1::IngestEventsResponse later;
  ASSERT_TRUE(SendEvents(trial, 1, 4, 3, &later).ok()) << "the batch after flows";
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
  absl::StatusOr<EventPage> events = store_->Events(trial, {10, SIZE_MAX, {}});
  ASSERT_TRUE(events.ok());
  EXPECT_EQ(events->events.size(), 2u) << "the odd event and the eval; diag rows are not text";
  absl::StatusOr<std::vector<LayerSeries>> norms =
      store_->LayerValues(trial, ByField("hidden_norm"));
  ASSERT_TRUE(norms.ok()) << norms.status();
  ASSERT_EQ(norms->size(), 1u);
  EXPECT_EQ(norms->front().steps, (std::vector<int64_t>{1}));
  EXPECT_TRUE(std::isnan(norms->front().values[0])) << "NaN stored as NULL, step kept";
  absl::StatusOr<std::vector<EvalRecord>> evals = store_->Evals(trial);
  ASSERT_TRUE(evals.ok());
  ASSERT_EQ(evals->size(), 1u);
  EXPECT_EQ(evals->front().value, 0.6);
  EXPECT_TRUE(std::isnan(evals->front().std_error));
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
