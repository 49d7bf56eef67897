// The store's packed metric values (schema/0011_packed_scalars.sql): one scalar_blocks row per
// batch and metric, read back exactly (every double, NULLs) through Curve and through the
// `scalars` and `curves` views; replays and overlapping batches store each value once; resumed
// attempts supersede as before; the migration of version 10's rows keeps every row of the views.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <tuple>

#include "server/store/migrations.h"
#include "server/store/packed_points.h"
#include "tests/server/store_fixture.h"

namespace spheret::store {
namespace {

bool SameBits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// Doubles of every kind: fractions, tiny and huge magnitudes, subnormals, random bit patterns.
std::vector<double> AwkwardDoubles(int count) {
  std::mt19937_64 random(47);
  std::vector<double> values = {0.1,
                                1.0 / 3,
                                2.5,
                                -7.0,
                                1e-300,
                                5e-324,
                                1.7976931348623157e308,
                                1e21,
                                123456789012345678.0,
                                -2.2250738585072014e-308};
  while (static_cast<int>(values.size()) < count) {
    const uint64_t bits = random();
    double value;
    std::memcpy(&value, &bits, sizeof value);
    if (std::isfinite(value)) values.push_back(value);
    values.push_back(1.0 / static_cast<double>(random() % 10'000'000 + 2));
  }
  return values;
}

TEST(PackedPointsTest, RoundTripsEveryDoubleExactlyInCppAndInSqlite) {
  const std::vector<double> values = AwkwardDoubles(20'000);
  std::vector<PackedPoint> points;
  for (size_t i = 0; i < values.size(); ++i) {
    const auto at = static_cast<int64_t>(i);
    points.push_back({at * 3 - 7, values[i], 1'733'480'000'000 + 5 * at});
  }
  std::string text;
  EncodePoints(points, 1'733'480'000'000, &text);
  std::vector<PackedPoint> back;
  ASSERT_TRUE(DecodePoints(text, 1'733'480'000'000, &back).ok());
  ASSERT_EQ(back.size(), points.size());
  auto db = *Database::Open(":memory:", false);
  Statement* each = *db->Prepare("SELECT p.value ->> 0, p.value ->> 1 FROM json_each(?1) p");
  each->Bind(1, text);
  for (size_t i = 0; i < points.size(); ++i) {
    EXPECT_EQ(back[i].step, points[i].step);
    EXPECT_EQ(back[i].wall_ms, points[i].wall_ms);
    EXPECT_TRUE(SameBits(back[i].value, points[i].value)) << i << ": " << points[i].value;
    ASSERT_TRUE(*each->Step());
    EXPECT_EQ(each->Int(0), points[i].step);
    EXPECT_TRUE(SameBits(each->Real(1), points[i].value)) << "SQLite reads " << i;
  }
  EXPECT_FALSE(*each->Step());
  each->Reset();
}

TEST(PackedPointsTest, NonFiniteValuesAreNullAndBadTextIsRefusedByOffset) {
  const double inf = std::numeric_limits<double>::infinity();
  std::string text;
  EncodePoints({{1, std::nan(""), 10}, {2, inf, 10}, {3, -inf, 12}, {4, -0.0, 10}}, 10, &text);
  EXPECT_EQ(text, "[[1,null,0],[2,null,0],[3,null,2],[4,0,0]]");
  std::vector<PackedPoint> back;
  ASSERT_TRUE(DecodePoints("[[5, 9e999, 0], [6,-9e999,1], [7,1e-999,0]]", 0, &back).ok());
  EXPECT_EQ(back[0].value, inf) << "as SQLite reads 9e999";
  EXPECT_EQ(back[1].value, -inf);
  EXPECT_EQ(back[2].value, 0.0);
  EXPECT_TRUE(DecodePoints("[]", 0, &back).ok());
  const absl::Status bad = DecodePoints("[[1,2.5,0],[2,x,0]]", 0, &back);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.message(),
            "packed metric values: expected a number or null at offset 14 of "
            "'[[1,2.5,0],[2,x,0]]'");
  EXPECT_FALSE(DecodePoints("[[1,2.5,0]", 0, &back).ok());
  EXPECT_FALSE(DecodePoints("[[1,2.5,0]] x", 0, &back).ok());
}

EventBatchRecord Batch(int64_t trial, int attempt, const std::vector<int64_t>& steps, double base) {
  EventBatchRecord batch{trial, attempt, {}, {}, 0, "", {}, {}};
  for (int64_t step : steps) {
    batch.metrics.push_back({"train/loss", step, base + step, 1000 + step});
    batch.metrics.push_back({"lr", step, 0.5, 1000 + step});
  }
  return batch;
}

std::vector<int64_t> Steps(int64_t from, int64_t to) {
  std::vector<int64_t> steps;
  for (int64_t step = from; step < to; ++step) steps.push_back(step);
  return steps;
}

TEST_F(StoreTest, PackedMetricsStoreEachValueOnceAcrossReplaysAndOverlaps) {
  std::unique_ptr<Store> store = Open();
  const int64_t trial = store->SubmitSweep(Sweep("a"), Trials(1), 1)->created[0].trial_id;
  EXPECT_EQ(*store->AppendEvents(Batch(trial, 1, Steps(0, 10), 0)), 20);
  EXPECT_EQ(Query("SELECT count(*) FROM scalar_blocks"), 2) << "one row per batch and metric";
  EXPECT_EQ(*store->AppendEvents(Batch(trial, 1, Steps(0, 10), 0)), 0) << "a replay";
  EXPECT_EQ(*store->AppendEvents(Batch(trial, 1, Steps(5, 15), 100)), 10) << "steps 10 to 14";
  EXPECT_EQ(*store->AppendEvents(Batch(trial, 1, {20, 18, 18, 3, 19}, 200)), 6)
      << "out of order: 18 once (the first), 3 stored before";
  EXPECT_EQ(Query("SELECT count(*) FROM scalars"), 36);
  EXPECT_EQ(Query("SELECT sum(count) FROM summaries"), 36);
  const CurveRecord curve = *store->Curve(trial, "train/loss");
  std::vector<int64_t> expected = Steps(0, 15);
  for (int64_t step : {18, 19, 20}) expected.push_back(step);
  EXPECT_EQ(curve.steps, expected);
  EXPECT_EQ(curve.values[4], 4.0);
  EXPECT_EQ(curve.values[12], 112.0) << "the first batch with step 12";
  EXPECT_EQ(curve.values[15], 218.0);
  EXPECT_EQ(Query("SELECT count(*) FROM curves WHERE metric = 'train/loss' AND value = 218 AND "
                  "step = 18 AND wall_ms = 1018 AND typeof(value) = 'real'"),
            1);

  EventBatchRecord gaps{trial, 1, {}, {}, 0, "", {}, {}};
  gaps.metrics.push_back({"val/loss", 30, std::nan(""), 5});
  gaps.metrics.push_back({"val/loss", 31, std::numeric_limits<double>::infinity(), 5});
  gaps.metrics.push_back({"val/loss", 32, 2.5, 5});
  EXPECT_EQ(*store->AppendEvents(gaps), 3);
  EXPECT_EQ(Query("SELECT count(*) FROM curves WHERE metric = 'val/loss' AND value IS NULL"), 2)
      << "NaN and infinity are stored as NULL, as before";
  const CurveRecord val = *store->Curve(trial, "val/loss");
  ASSERT_EQ(val.values.size(), 3u);
  EXPECT_TRUE(std::isnan(val.values[0]) && std::isnan(val.values[1]));
  EXPECT_EQ(val.values[2], 2.5);
  EXPECT_EQ((*store->Summaries(trial))["val/loss"].count, 3);
}

// As with one row per value: a resumed attempt supersedes the older attempts' values of a metric
// from the first step it reports (again after a restart); a lapsed attempt's values that arrive
// later are superseded only by a later resumption.
TEST_F(StoreTest, PackedMetricsKeepResumeSupersession) {
  std::unique_ptr<Store> store = Open();
  const int64_t trial = store->SubmitSweep(Sweep("a"), Trials(1), 1)->created[0].trial_id;
  for (int64_t from = 0; from < 100; from += 25) {
    ASSERT_TRUE(store->AppendEvents(Batch(trial, 1, Steps(from, from + 25), 0)).ok());
  }
  ASSERT_TRUE(store->AppendEvents(Batch(trial, 2, Steps(50, 80), 1000)).ok());
  ASSERT_TRUE(store->AppendEvents(Batch(trial, 1, Steps(100, 105), 0)).ok());  // lapsed, late
  const std::string loss =
      " FROM scalars WHERE metric_id = (SELECT metric_id FROM metric_names "
      "WHERE name = 'train/loss')";
  EXPECT_EQ(Query("SELECT count(*)" + loss + " AND superseded = 1"), 50);
  std::vector<int64_t> expected = Steps(0, 80);
  for (int64_t step : Steps(100, 105)) expected.push_back(step);
  CurveRecord curve = *store->Curve(trial, "train/loss");
  EXPECT_EQ(curve.steps, expected);
  EXPECT_EQ(curve.values[49], 49.0);
  EXPECT_EQ(curve.values[50], 1050.0);
  EXPECT_EQ(curve.values[80], 100.0) << "the lapsed attempt's late value";

  ASSERT_TRUE(store->AppendEvents(Batch(trial, 3, Steps(60, 70), 2000)).ok());
  store = Open();  // a restart forgets what superseded: attempt 3 supersedes again
  ASSERT_TRUE(store->AppendEvents(Batch(trial, 3, Steps(70, 90), 2000)).ok());
  EXPECT_EQ(Query("SELECT count(*)" + loss), 100 + 30 + 5 + 30);
  EXPECT_EQ(Query("SELECT count(*)" + loss + " AND superseded = 1 AND attempt = 1"), 55);
  EXPECT_EQ(Query("SELECT count(*)" + loss + " AND superseded = 1 AND attempt = 2"), 20);
  curve = *store->Curve(trial, "train/loss");
  EXPECT_EQ(curve.steps, Steps(0, 90));
  ASSERT_EQ(curve.values.size(), 90u);
  EXPECT_EQ(curve.values[59], 1059.0);
  EXPECT_EQ(curve.values[60], 2060.0);
  EXPECT_EQ(curve.values[89], 2089.0);
  EXPECT_EQ(Query("SELECT count(*) FROM curves WHERE metric = 'train/loss'"), 90);
  EXPECT_EQ(Query("SELECT count(*) FROM curves WHERE metric = 'lr'"), 90);
}

using CurveRow = std::tuple<int64_t, std::string, int64_t, int64_t, int64_t, bool, double>;

std::vector<CurveRow> CurveRows(Database& db) {
  Statement* rows = *db.Prepare(
      "SELECT trial_id, metric, step, attempt, wall_ms, value IS NULL, coalesce(value, 0), "
      "typeof(value) FROM curves ORDER BY trial_id, metric, step, attempt");
  std::vector<CurveRow> out;
  while (*rows->Step()) {
    EXPECT_TRUE(rows->Text(7) == "real" || rows->Text(7) == "null");
    out.emplace_back(rows->Int(0), rows->Text(1), rows->Int(2), rows->Int(3), rows->Int(4),
                     rows->Int(5) != 0, rows->Real(6));
  }
  rows->Reset();
  return out;
}

// A version-10 database at `path` with `values` in scalars: two trials and metrics, attempt 2
// resuming at step 300 of one of them, attempt 1's steps 300 to 599 superseded, NULLs, and two
// attempts' values at steps 600 and 601 (a lapsed attempt's late rows).
void WriteVersion10Scalars(const std::string& path, const std::vector<double>& values) {
  {
    auto db = *Database::Open(path, false);
    ASSERT_TRUE(Migrate(*db, 10).ok());
    ASSERT_TRUE(db->Exec("INSERT INTO metric_names(metric_id, name) VALUES (1, 'train/loss'), "
                         "(2, 'val/loss')")
                    .ok());
    ASSERT_TRUE(db->Exec("BEGIN").ok());
    Statement* insert = *db->Prepare("INSERT INTO scalars VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
    for (size_t i = 0; i < values.size(); ++i) {
      const int64_t step = static_cast<int64_t>(i / 4);
      const int attempt = i % 4 == 3 && step >= 300 ? 2 : 1;
      insert->Bind(1, static_cast<int64_t>(1 + i % 2))
          .Bind(2, static_cast<int64_t>(1 + (i / 2) % 2));
      insert->Bind(3, step);
      insert->Bind(4, attempt).Bind(6, static_cast<int64_t>(1'733'000'000'000 + i * 7));
      if (i % 101 == 0) {
        insert->BindNull(5);
      } else {
        insert->Bind(5, values[i]);
      }
      ASSERT_TRUE(insert->Bind(7, attempt == 1 && step >= 300 && step < 600 ? 1 : 0).Run().ok());
    }
    ASSERT_TRUE(db->Exec("INSERT INTO scalars VALUES (1, 1, 600, 2, 0.25, 0, 0), "
                         "(1, 1, 601, 2, NULL, 0, 0)")
                    .ok());  // two attempts' values at one step (a lapsed attempt's late rows)
    ASSERT_TRUE(db->Exec("COMMIT").ok());
  }
}

TEST_F(StoreTest, MigrationPacksScalarsAndKeepsEveryCurveRow) {
  const std::vector<double> values = AwkwardDoubles(3'000);
  WriteVersion10Scalars(path_, values);
  const std::vector<CurveRow> before = CurveRows(**Database::Open(path_, true));
  ASSERT_GT(before.size(), 2'000u);
  std::unique_ptr<Store> store = Open();
  ASSERT_NE(store, nullptr);
  auto db = *Database::Open(path_, true);
  const std::vector<CurveRow> after = CurveRows(*db);
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_EQ(std::get<6>(after[i]), std::get<6>(before[i])) << i;
    EXPECT_TRUE(SameBits(std::get<6>(after[i]), std::get<6>(before[i]))) << i;
    EXPECT_EQ(after[i], before[i]) << i;
  }
  EXPECT_EQ(Query("SELECT count(*) FROM scalars"), static_cast<int64_t>(values.size()) + 2);
  EXPECT_LT(Query("SELECT count(*) FROM scalar_blocks"), 20);
  // Curve: the rows of train/loss of trial 1 by step, a newer attempt's value at a repeated step.
  CurveRecord expected{1, {}, {}};
  for (const auto& [trial, metric, step, attempt, wall, null, value] : before) {
    if (trial != 1 || metric != "train/loss") continue;
    const double read = null ? std::nan("") : value;
    if (!expected.steps.empty() && expected.steps.back() == step) {
      expected.values.back() = read;
    } else {
      expected.steps.push_back(step);
      expected.values.push_back(read);
    }
  }
  const CurveRecord curve = *store->Curve(1, "train/loss");
  EXPECT_EQ(curve.steps, expected.steps);
  ASSERT_EQ(curve.values.size(), expected.values.size());
  for (size_t i = 0; i < curve.values.size(); ++i) {
    EXPECT_TRUE(SameBits(curve.values[i], expected.values[i]) ||
                (std::isnan(curve.values[i]) && std::isnan(expected.values[i])))
        << curve.steps[i];
  }
}

}  // namespace
}  // namespace spheret::store
