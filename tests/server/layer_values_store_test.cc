// The store's per-layer values (schema/0007_layer_values.sql): written one per (field, layer,
// sublayer, step) of a diag row, read back by field and ranges, idempotent per attempt,
// superseded by a resumed attempt, and migrated from the diag/FIELD/LAYER/SUBLAYER metrics of
// earlier versions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "server/store/migrations.h"
#include "tests/server/store_fixture.h"

namespace spheret::store {
namespace {

// One typed road: a diag row's values are stored one per (field, layer, sublayer, step), not as
// metrics and not as event text, and read back by field (NaN where the trainer wrote null).
TEST_F(StoreTest, LayerValuesAreWrittenAndReadBackByField) {
  std::unique_ptr<Store> store = Open();
  const int64_t trial = store->SubmitSweep(Sweep("a"), Trials(1), 1)->created[0].trial_id;
  EventBatchRecord batch{trial, 1, {{"train/loss", 0, 3.0, 0}}, {}, 0, "", {}, {}};
  batch.diags.push_back({0, 1, "attn", {{"hidden_norm", 11.3}, {"theta", 0.2}}});
  batch.diags.push_back({10, 1, "attn", {{"hidden_norm", 11.4}, {"theta", std::nan("")}}});
  batch.diags.push_back({10, 2, "mlp", {{"hidden_norm", 12.0}, {"token_cos", 0.99}}});
  batch.diags.push_back({10, 0, "model", {{"delta_sum", 0.5}}});
  EXPECT_EQ(*store->AppendEvents(batch), 1) << "the count is of metric rows";
  EXPECT_EQ(store->Summaries(trial)->size(), 1u) << "no per-layer metric";
  EXPECT_EQ(Query("SELECT count(*) FROM layer_values"), 7);
  EXPECT_EQ(Query("SELECT count(*) FROM events"), 0) << "no JSON text of diag events";

  std::vector<LayerSeries> norms = *store->LayerValues(trial, ByField("hidden_norm"));
  ASSERT_EQ(norms.size(), 2u);
  EXPECT_EQ(norms[0].layer, 1);
  EXPECT_EQ(norms[0].sublayer, "attn");
  EXPECT_EQ(norms[0].steps, (std::vector<int64_t>{0, 10}));
  EXPECT_EQ(norms[0].values, (std::vector<double>{11.3, 11.4}));
  EXPECT_EQ(norms[1].layer, 2);
  EXPECT_EQ(norms[1].sublayer, "mlp");
  std::vector<LayerSeries> theta = *store->LayerValues(trial, ByField("theta"));
  ASSERT_EQ(theta.size(), 1u);
  EXPECT_TRUE(std::isnan(theta[0].values[1])) << "NULL reads back as NaN, step kept";
  EXPECT_EQ(store->LayerValues(trial, ByField("delta_sum"))->front().layer, 0);
  EXPECT_TRUE(store->LayerValues(trial, ByField("alpha"))->empty());
  EXPECT_TRUE(store->LayerValues(trial + 1, ByField("hidden_norm"))->empty());

  // Ranges: one sublayer, layers, steps.
  EXPECT_EQ(store->LayerValues(trial, ByField("hidden_norm", "mlp"))->size(), 1u);
  LayerValueQuery deep = ByField("hidden_norm");
  deep.min_layer = 2;
  deep.max_layer = 4;
  EXPECT_EQ(store->LayerValues(trial, deep)->front().layer, 2);
  LayerValueQuery late = ByField("hidden_norm", "attn");
  late.min_step = 5;
  late.max_step = 20;
  EXPECT_EQ(store->LayerValues(trial, late)->front().steps, (std::vector<int64_t>{10}));
}

// A batch sent again (a lost acknowledgement) stores nothing twice; a resumed attempt supersedes
// the older attempt's values of a field from the first step it reports, per field.
TEST_F(StoreTest, LayerValuesAreIdempotentAndResumedAttemptsSupersede) {
  std::unique_ptr<Store> store = Open();
  const int64_t trial = store->SubmitSweep(Sweep("a"), Trials(1), 1)->created[0].trial_id;
  EventBatchRecord first{trial, 1, {}, {}, 0, "", {}, {}};
  for (int step = 0; step < 30; step += 5) {
    first.diags.push_back({step, 1, "mlp", {{"hidden_norm", 1.0 + step}, {"theta", 0.1}}});
  }
  ASSERT_TRUE(store->AppendEvents(first).ok());
  ASSERT_TRUE(store->AppendEvents(first).ok());
  EXPECT_EQ(Query("SELECT count(*) FROM layer_values"), 12) << "a replay stores nothing";

  EventBatchRecord resumed{trial, 2, {}, {}, 0, "", {}, {}};
  for (int step = 15; step < 40; step += 5) {
    resumed.diags.push_back({step, 1, "mlp", {{"hidden_norm", 100.0 + step}}});
  }
  ASSERT_TRUE(store->AppendEvents(resumed).ok());
  ASSERT_TRUE(store->AppendEvents(resumed).ok());
  EXPECT_EQ(Query("SELECT count(*) FROM layer_values WHERE superseded = 1"), 3)
      << "hidden_norm of attempt 1 at steps 15, 20, 25";
  const LayerSeries norm = store->LayerValues(trial, ByField("hidden_norm"))->front();
  EXPECT_EQ(norm.steps, (std::vector<int64_t>{0, 5, 10, 15, 20, 25, 30, 35}));
  EXPECT_EQ(norm.values[2], 11.0);
  EXPECT_EQ(norm.values[3], 115.0) << "the resumed attempt's value";
  EXPECT_EQ(store->LayerValues(trial, ByField("theta"))->front().steps.size(), 6u)
      << "theta, which the resumed attempt did not report, keeps its values";
  EXPECT_EQ(Query("SELECT count(*) FROM layer_curves WHERE field = 'hidden_norm'"), 8);
}

// Version 7 moves the per-layer metrics diag/FIELD/LAYER/SUBLAYER of earlier versions into
// layer_values (superseded flags kept), drops their metric names, summaries and the diag events'
// JSON text, and leaves every other metric and event alone.
TEST_F(StoreTest, MigrationMovesDiagMetricsIntoLayerValues) {
  {
    auto db = *Database::Open(path_, false);
    ASSERT_TRUE(Migrate(*db, 6).ok());
    ASSERT_TRUE(db->Exec(R"(
      INSERT INTO metric_names(metric_id, name) VALUES (1, 'train/loss'),
        (2, 'diag/hidden_norm/1/attn'), (3, 'diag/jacobian_cond/12/mlp'), (4, 'diag/x/0/attn'),
        (5, 'diag/x/1/ffn'), (6, 'diag/Theta/1/attn');
      INSERT INTO scalars(trial_id, metric_id, step, attempt, value, wall_ms, superseded) VALUES
        (1, 1, 0, 1, 2.5, 0, 0), (1, 2, 0, 1, 11.3, 0, 0), (1, 2, 10, 1, 11.4, 0, 1),
        (1, 2, 10, 2, 11.5, 0, 0), (1, 3, 5, 1, 40, 0, 0), (1, 4, 0, 1, 1, 0, 0);
      INSERT INTO summaries VALUES (1, 1, 2.5, 2.5, 2.5, 1, 0), (1, 2, 11.5, 11.3, 11.5, 3, 10);
      INSERT INTO events(trial_id, attempt, seq, json) VALUES
        (1, 1, 1, '{"hidden_norm":1.0,"layer":1,"type":"diag"}'), (1, 1, 2, '{"type":"done"}'),
        (1, 1, 3, 'not json');)")
                    .ok());
  }
  std::unique_ptr<Store> store = Open();
  ASSERT_NE(store, nullptr);
  const LayerSeries norm = store->LayerValues(1, ByField("hidden_norm"))->front();
  EXPECT_EQ(norm.layer, 1);
  EXPECT_EQ(norm.sublayer, "attn");
  EXPECT_EQ(norm.steps, (std::vector<int64_t>{0, 10}));
  EXPECT_EQ(norm.values, (std::vector<double>{11.3, 11.5}));
  EXPECT_EQ(store->LayerValues(1, ByField("jacobian_cond"))->front().layer, 12);
  EXPECT_EQ(Query("SELECT count(*) FROM metric_names WHERE name GLOB 'diag/*'"), 3)
      << "names not of the form stay metrics";
  EXPECT_EQ(Query("SELECT count(*) FROM summaries"), 1);
  EXPECT_EQ(Query("SELECT count(*) FROM scalars"), 2);
  EXPECT_EQ(Query("SELECT count(*) FROM events"), 2);
  EXPECT_EQ(store->Summaries(1)->count("train/loss"), 1u);
}

}  // namespace
}  // namespace spheret::store
