// The coordinator's core over a store whose commits can be made to fail (a full disk, an I/O
// error): a decision whose commit fails is undone in memory, so memory never runs ahead of the
// database. In process, with a fake clock and a real SQLite store under a failing decorator.
#include "server/coordinator.h"

#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <sstream>

#include "tests/server/layer_query.h"

namespace spheret {
namespace {

using store::ByField;

// A real store whose Apply (the commit of scheduler decisions) fails while `fail_commits` is set,
// as a full disk makes it fail: nothing of the decision reaches the database.
class FlakyStore : public store::Store {
 public:
  explicit FlakyStore(std::unique_ptr<store::Store> inner) : inner_(std::move(inner)) {}
  std::atomic<bool> fail_commits{false};

  std::future<absl::Status> Apply(Changes changes, int64_t now_ms) override {
    if (!fail_commits) return inner_->Apply(std::move(changes), now_ms);
    std::promise<absl::Status> failed;
    failed.set_value(absl::UnavailableError("database or disk is full"));
    return failed.get_future();
  }
  std::future<absl::Status> ResumeDecisions() override { return inner_->ResumeDecisions(); }
  absl::StatusOr<store::SubmitOutcome> SubmitSweep(const SweepRecord& sweep,
                                                   const std::vector<TrialSpec>& trials,
                                                   int64_t now_ms) override {
    return inner_->SubmitSweep(sweep, trials, now_ms);
  }
  absl::StatusOr<int64_t> AppendEvents(const EventBatchRecord& batch) override {
    return inner_->AppendEvents(batch);
  }
  absl::Status SetLastAlive(int64_t now_ms) override { return inner_->SetLastAlive(now_ms); }
  absl::Status CreateToken(const std::string& hash, const std::string& name, Role role,
                           const std::string& worker_id, int64_t now_ms,
                           int64_t expires_ms) override {
    return inner_->CreateToken(hash, name, role, worker_id, now_ms, expires_ms);
  }
  absl::StatusOr<store::RestoredState> LoadState() override { return inner_->LoadState(); }
  absl::StatusOr<SweepRecord> GetSweep(int64_t id) override { return inner_->GetSweep(id); }
  absl::StatusOr<std::vector<SweepRecord>> ListSweeps(int64_t after, int limit) override {
    return inner_->ListSweeps(after, limit);
  }
  absl::StatusOr<std::map<std::string, int64_t>> CountTrials(int64_t sweep_id) override {
    return inner_->CountTrials(sweep_id);
  }
  absl::StatusOr<std::map<std::string, int64_t>> CountEvalJobs() override {
    return inner_->CountEvalJobs();
  }
  absl::StatusOr<std::vector<TrialRecord>> ListTrials(const store::TrialQuery& query) override {
    return inner_->ListTrials(query);
  }
  absl::StatusOr<std::optional<TrialRecord>> GetTrial(int64_t id) override {
    return inner_->GetTrial(id);
  }
  absl::StatusOr<std::map<std::string, MetricSummary>> Summaries(int64_t id) override {
    return inner_->Summaries(id);
  }
  absl::StatusOr<std::vector<AttemptRecord>> Attempts(int64_t id) override {
    return inner_->Attempts(id);
  }
  absl::StatusOr<EventPage> Events(int64_t id, const EventPageQuery& query) override {
    return inner_->Events(id, query);
  }
  absl::StatusOr<std::vector<EvalRecord>> Evals(int64_t id) override { return inner_->Evals(id); }
  absl::StatusOr<std::vector<RungValue>> RungValues(int64_t sweep_id) override {
    return inner_->RungValues(sweep_id);
  }
  absl::StatusOr<int64_t> LatestCheckpointStep(int64_t id) override {
    return inner_->LatestCheckpointStep(id);
  }
  absl::StatusOr<CurveRecord> Curve(int64_t id, const std::string& metric) override {
    return inner_->Curve(id, metric);
  }
  absl::StatusOr<std::vector<LayerSeries>> LayerValues(int64_t id,
                                                       const LayerValueQuery& query) override {
    return inner_->LayerValues(id, query);
  }
  absl::StatusOr<std::vector<TokenRecord>> ListTokens(int64_t after, int limit) override {
    return inner_->ListTokens(after, limit);
  }
  absl::StatusOr<int64_t> RevokeToken(const std::string& name) override {
    return inner_->RevokeToken(name);
  }
  absl::StatusOr<std::optional<TokenIdentity>> FindToken(const std::string& hash) override {
    return inner_->FindToken(hash);
  }
  store::StoreStats Stats() const override { return inner_->Stats(); }
  void OnCommit(std::function<void(double)> callback) override {
    inner_->OnCommit(std::move(callback));
  }

 private:
  std::unique_ptr<store::Store> inner_;
};

class CoordinatorTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("spheret_coordinator_test_" + std::to_string(getpid()) + "_" +
            testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    auto inner = store::OpenSqliteStore({(dir_ / "spheret.db").string()});
    ASSERT_TRUE(inner.ok()) << inner.status();
    store_ = std::make_unique<FlakyStore>(std::move(*inner));
    metrics_ = std::make_unique<metrics::CoordinatorMetrics>("test");
    CoordinatorOptions options;
    options.housekeeping_interval_ms = 3'600'000;  // no background decisions
    auto coordinator = Coordinator::Start(store_.get(), metrics_.get(), &clock_, options);
    ASSERT_TRUE(coordinator.ok()) << coordinator.status();
    coordinator_ = std::move(*coordinator);
    ASSERT_TRUE(
        coordinator_
            ->Submit("name: s\ndataset: d\nparameters: {method: {values: [pre_ln]}}\n", "", false)
            .ok());
    for (const char* id : {"w1", "w2"}) {
      WorkerRecord worker;
      worker.worker_id = id;
      worker.cpu_slots = 1;
      ASSERT_TRUE(coordinator_->Register(worker, {}).ok());
    }
  }
  void TearDown() override {
    coordinator_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  TrialRecord Stored() { return **store_->GetTrial(1); }

  // The coordinator's /metrics page as text.
  std::string MetricsText() {
    std::ostringstream text;
    prometheus::TextSerializer().Serialize(text, metrics_->registry()->Collect());
    return text.str();
  }

  std::filesystem::path dir_;
  FakeClock clock_;
  std::unique_ptr<FlakyStore> store_;
  std::unique_ptr<metrics::CoordinatorMetrics> metrics_;
  std::unique_ptr<Coordinator> coordinator_;
};

// Issue 11, item 7: an Acquire whose commit fails grants nothing, in memory as on disk (before,
// the trial stayed RUNNING in memory under a lease no one had: a zombie).
TEST_F(CoordinatorTest, DecisionsBeforeCommitsAFailedAcquireLeavesNoZombie) {
  store_->fail_commits = true;
  EXPECT_FALSE(coordinator_->Acquire("w1", "", 1, 0, 1).ok());
  store_->fail_commits = false;
  EXPECT_EQ(Stored().state, TrialState::kPending);
  // The trial is still free for anyone: another worker gets it, as attempt 1.
  absl::StatusOr<std::vector<Lease>> grants = coordinator_->Acquire("w2", "", 1, 0, 1);
  ASSERT_TRUE(grants.ok()) << grants.status();
  ASSERT_EQ(grants->size(), 1u);
  EXPECT_EQ(grants->front().record.attempt, 1);
  EXPECT_EQ(Stored().state, TrialState::kRunning);
  EXPECT_EQ(Stored().attempt, 1);
}

// Issue 11, item 7: a Finish whose commit fails leaves the attempt live, so the worker's retry
// lands (before, the trial was terminal in memory, the retry was refused as stale, and the
// database kept it RUNNING forever).
TEST_F(CoordinatorTest, DecisionsBeforeCommitsAFailedFinishCanBeRetried) {
  ASSERT_EQ(coordinator_->Acquire("w1", "", 1, 0, 1)->size(), 1u);
  AttemptEnd end;
  end.trial_id = 1;
  end.attempt = 1;
  end.outcome = TrialState::kSucceeded;
  store_->fail_commits = true;
  EXPECT_FALSE(coordinator_->Finish(end, "w1").ok());
  store_->fail_commits = false;
  EXPECT_EQ(Stored().state, TrialState::kRunning);
  absl::StatusOr<TrialState> retried = coordinator_->Finish(end, "w1");
  ASSERT_TRUE(retried.ok()) << retried.status();
  EXPECT_EQ(*retried, TrialState::kSucceeded);
  EXPECT_EQ(Stored().state, TrialState::kSucceeded);
}

// One typed road: a diag row within the trial's depth (12 here: nanoGPT's default n_layer, one
// loop) is stored whatever its fields, and those on the exported list become Prometheus series; a
// row beyond the depth is neither stored nor exported (issue 28, item 8); both are counted. A row
// that breaks the protocol's rules is refused with the field named, and nothing of its batch is
// stored.
TEST_F(CoordinatorTest, LayerValuesBeyondTheTrialsDepthAreNeitherStoredNorExported) {
  ASSERT_EQ(coordinator_->Acquire("w1", "", 1, 0, 1)->size(), 1u);
  EventBatchRecord batch{1, 1, {}, {}, 0, "", {}, {}};
  batch.diags.push_back({10, 12, "mlp", {{"token_cos", 0.999}, {"secret_field", 7}}});
  batch.diags.push_back({10, 13, "attn", {{"token_cos", 0.5}}});  // beyond 12
  batch.diags.push_back({10, 0, "model", {{"delta_sum", 0.25}}});
  batch.diags.push_back({10, 24, "dyadic", {{"theta2_budget", 0.1}}});
  batch.diags.push_back({10, 25, "dyadic", {{"theta2_budget", 0.2}}});  // beyond 2 x 12
  ASSERT_TRUE(coordinator_->Ingest(batch, "w1").ok());
  const std::string text = MetricsText();
  EXPECT_NE(text.find("field=\"token_cos\",layer=\"12\""), std::string::npos) << text;
  EXPECT_EQ(text.find("layer=\"13\""), std::string::npos) << text;
  EXPECT_EQ(text.find("layer=\"25\""), std::string::npos) << text;
  EXPECT_EQ(text.find("secret_field"), std::string::npos) << text;
  EXPECT_NE(text.find("field=\"delta_sum\",layer=\"0\""), std::string::npos) << text;
  EXPECT_NE(text.find("field=\"theta2_budget\",layer=\"24\""), std::string::npos) << text;
  EXPECT_NE(text.find("spheret_layer_values_unexported_total{reason=\"field\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("spheret_layer_values_unexported_total{reason=\"layer\"} 2"),
            std::string::npos)
      << text;
  // Those within the depth are stored whatever their field, and read back by field.
  EXPECT_EQ(store_->LayerValues(1, ByField("token_cos"))->size(), 1u);
  EXPECT_EQ(store_->LayerValues(1, ByField("secret_field"))->size(), 1u);
  EXPECT_EQ(store_->LayerValues(1, ByField("theta2_budget", "dyadic"))->size(), 1u);

  EventBatchRecord bad{1, 1, {{"train/loss", 11, 2.0, 0}}, {}, 0, "", {}, {}};
  bad.diags.push_back({11, 1, "attn", {{"Token_Cos", 0.5}}});
  absl::StatusOr<int64_t> refused = coordinator_->Ingest(bad, "w1");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("field 'values'"), absl::string_view::npos)
      << refused.status();
  EXPECT_EQ(store_->Curve(1, "train/loss")->steps.size(), 0u) << "nothing of the batch stored";
  metrics_->TrialEnded(1);
  EXPECT_EQ(MetricsText().find("spheret_layer_value{"), std::string::npos);
}

// Issue 28, item 8: four batches of 50,000 diag rows over every layer the protocol admits took
// 5.7 -> 24.5 s each, 1.3 GB and a 65 MB /metrics page. The trial's depth (12) bounds what is
// stored and exported: 49 rows (attn and mlp 1..12, model 0, dyadic 1..24) make 49 series, the
// rest is counted, and the trial's series go when it ends.
TEST_F(CoordinatorTest, ManyRowsBeyondTheTrialsDepthMakeBoundedSeriesAndStoreNothing) {
  ASSERT_EQ(coordinator_->Acquire("w1", "", 1, 0, 1)->size(), 1u);
  const char* const kSublayers[] = {"attn", "mlp", "model", "dyadic"};
  int64_t within = 0, step = 0;
  for (int batch_index = 0; batch_index < 4; ++batch_index) {
    EventBatchRecord batch{1, 1, {}, {}, 0, "", {}, {}};
    for (int i = 0; i < 50'000; ++i, ++step) {
      const std::string sublayer = kSublayers[step % 4];
      const int64_t high = sublayer == "model" ? 0 : sublayer == "dyadic" ? 8192 : 4096;
      const int64_t layer = sublayer == "model" ? 0 : 1 + (step / 4) % high;
      const int64_t depth_high = sublayer == "model" ? 0 : sublayer == "dyadic" ? 24 : 12;
      within += sublayer == "model" || layer <= depth_high;
      batch.diags.push_back({step, layer, sublayer, {{"token_cos", 0.5}}});
    }
    absl::StatusOr<int64_t> ingested = coordinator_->Ingest(batch, "w1");
    ASSERT_TRUE(ingested.ok()) << ingested.status();
  }
  EXPECT_EQ(metrics_->trial_series(), 49u);
  const std::string text = MetricsText();
  EXPECT_NE(text.find("spheret_layer_values_unexported_total{reason=\"layer\"} " +
                      std::to_string(200'000 - within) + "\n"),
            std::string::npos)
      << "within " << within;
  EXPECT_EQ(text.find("layer=\"25\""), std::string::npos);
  EXPECT_LT(text.size(), 50'000u);
  int64_t stored = 0;
  for (const LayerSeries& series : *store_->LayerValues(1, ByField("token_cos"))) {
    stored += static_cast<int64_t>(series.steps.size());
  }
  EXPECT_EQ(stored, within);
  metrics_->TrialEnded(1);
  EXPECT_EQ(metrics_->trial_series(), 0u);
  EXPECT_EQ(MetricsText().find("spheret_layer_value{"), std::string::npos);
}

// Issue 28, item 9: SIGSTOP of the coordinator for 15 s with a 6 s TTL turned running trials
// FAILED ("lease expired", a failure charged). The first decision after the stall, whichever it
// is, renews the leases of the workers alive before it; a worker still silent a TTL later loses
// its lease as before.
TEST_F(CoordinatorTest, AStallLongerThanTheTtlExpiresNoLeaseAndChargesNoFailure) {
  coordinator_.reset();
  CoordinatorOptions options;
  options.scheduler.lease_ttl_ms = 6'000;
  options.housekeeping_interval_ms = 3'600'000;  // the test runs housekeeping itself
  options.stall_ms = 2'000;
  auto restarted = Coordinator::Start(store_.get(), metrics_.get(), &clock_, options);
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  coordinator_ = std::move(*restarted);
  ASSERT_EQ(coordinator_->Acquire("w1", "", 1, 0, 1)->size(), 1u);
  for (int i = 0; i < 3; ++i) {
    clock_.AdvanceMs(1'000);
    ASSERT_TRUE(coordinator_->Heartbeat("w1", "", {{1, 1}}).ok());
    ASSERT_TRUE(coordinator_->Heartbeat("w2", "", {}).ok());
    coordinator_->Housekeeping();
  }
  clock_.AdvanceMs(15'000);                                 // stopped: no decision for 15 s
  ASSERT_TRUE(coordinator_->Heartbeat("w2", "", {}).ok());  // the first decision after it
  // An Acquire that waited through the stall is likely given up by its caller: none is granted
  // for one stall threshold (2 s), lest its answer be lost and its lease expire as a failure.
  EXPECT_EQ(coordinator_->Acquire("w2", "", 1, 0, 1).status().code(),
            absl::StatusCode::kUnavailable);
  coordinator_->Housekeeping();
  EXPECT_EQ(Stored().state, TrialState::kRunning);
  EXPECT_EQ(Stored().failures, 0);
  EXPECT_EQ(Stored().attempt, 1);
  const std::string text = MetricsText();
  EXPECT_NE(text.find("spheret_coordinator_stalls_total 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("spheret_coordinator_stall_seconds_total 15\n"), std::string::npos) << text;
  EXPECT_NE(text.find("spheret_lease_expirations_total 0\n"), std::string::npos) << text;
  // "w1" stays silent: one TTL after the stall its lease expires, a failure as before.
  for (int i = 0; i < 7; ++i) {
    clock_.AdvanceMs(1'000);
    ASSERT_TRUE(coordinator_->Heartbeat("w2", "", {}).ok());
    coordinator_->Housekeeping();
    if (i == 2) {
      EXPECT_TRUE(coordinator_->Acquire("w2", "", 1, 0, 1).ok()) << "2 s after the stall";
    }
  }
  EXPECT_EQ(Stored().state, TrialState::kPending);
  EXPECT_EQ(Stored().failures, 1);
  EXPECT_NE(MetricsText().find("spheret_lease_expirations_total 1\n"), std::string::npos);
}

}  // namespace
}  // namespace spheret
