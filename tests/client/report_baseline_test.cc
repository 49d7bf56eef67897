// Each method against a baseline over seeds (client/report/baseline.h); the figures themselves
// are held against scipy.stats by stats_scipy_test.py.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "client/report/baseline.h"
#include "client/report/results.h"

namespace spheret::client {
namespace {

TrialResult Trial(int64_t id, const std::string& method, double p, int seed, double val_loss) {
  nlohmann::json config = {{"method", method}, {"scale", "xs"}, {"seed", seed}};
  if (p > 0) config["p"] = p;
  return {id, TrialState::kSucceeded, TrialConfig(config.dump()), {{"val/loss", val_loss}}};
}

// Columns of BaselineTable.
enum { kRow, kScale, kMetric, kTest, kN, kNBase, kDiff, kLow, kHigh, kP, kIncludesZero };

TEST(BaselineTable, PairsTheSameSeedsAndMarksAnIntervalThatIncludesZero) {
  // geonorm − pre_ln = 0.1, 0.2, 0.3 by seed (listed out of order): mean 0.2, sd 0.1, t = 2√3,
  // 95% interval 0.2 ± 4.302652729911275 · 0.1 / √3 (t quantile at 0.975, 2 df): includes 0.
  // keel − pre_ln = 1.0, 1.1, 0.9: the interval excludes 0.
  const std::vector<TrialResult> trials = {
      Trial(1, "pre_ln", 0, 1, 3.0),  Trial(2, "pre_ln", 0, 2, 3.5),
      Trial(3, "pre_ln", 0, 3, 2.5),  Trial(4, "geonorm", 0, 3, 2.8),
      Trial(5, "geonorm", 0, 1, 3.1), Trial(6, "geonorm", 0, 2, 3.7),
      Trial(7, "keel", 0, 1, 4.0),    Trial(8, "keel", 0, 2, 4.6),
      Trial(9, "keel", 0, 3, 3.4)};
  const ResultTable results = AggregateResults(trials, {"val/loss"});
  absl::StatusOr<Table> table = BaselineTable(results, "pre_ln", Format::kCsv, 3);
  ASSERT_TRUE(table.ok()) << table.status();
  ASSERT_EQ(table->rows.size(), 2u);
  const std::vector<std::string>& keel = table->rows[0];  // the paper's order: keel, geonorm
  const std::vector<std::string>& geonorm = table->rows[1];
  EXPECT_EQ(keel[kRow], "keel");
  EXPECT_EQ(geonorm[kRow], "geonorm");
  EXPECT_EQ(table->header[kNBase], "n pre_ln");
  EXPECT_EQ(geonorm[kTest], "paired t");
  EXPECT_EQ(geonorm[kN], "3");
  const double half = 4.302652729911275 * 0.1 / std::sqrt(3.0);
  EXPECT_NEAR(std::stod(geonorm[kDiff]), 0.2, 1e-12);
  EXPECT_NEAR(std::stod(geonorm[kLow]), 0.2 - half, 1e-9);
  EXPECT_NEAR(std::stod(geonorm[kHigh]), 0.2 + half, 1e-9);
  EXPECT_EQ(geonorm[kIncludesZero], "≈ 0");
  EXPECT_NEAR(std::stod(keel[kDiff]), 1.0, 1e-12);
  EXPECT_GT(std::stod(keel[kLow]), 0);
  EXPECT_LT(std::stod(keel[kP]), 0.01);
  EXPECT_EQ(keel[kIncludesZero], "");
}

TEST(BaselineTable, WelchWhenTheSeedsDifferAndNothingFromOneSeed) {
  const std::vector<TrialResult> trials = {
      Trial(1, "pre_ln", 0, 1, 3.0), Trial(2, "pre_ln", 0, 2, 3.5), Trial(3, "geonorm", 0, 1, 2.8),
      Trial(4, "geonorm", 0, 7, 3.1), Trial(5, "keel", 0, 1, 4.0)};
  const ResultTable results = AggregateResults(trials, {"val/loss"});
  absl::StatusOr<Table> table = BaselineTable(results, "pre_ln", Format::kTable, 3);
  ASSERT_TRUE(table.ok()) << table.status();
  ASSERT_EQ(table->rows.size(), 2u);
  EXPECT_EQ(table->rows[0][kTest], "needs 2 seeds each");  // keel: one seed
  EXPECT_EQ(table->rows[0][kDiff], "");
  EXPECT_EQ(table->rows[0][kIncludesZero], "");
  EXPECT_EQ(table->rows[1][kTest], "Welch t");
  EXPECT_EQ(table->rows[1][kDiff], "-0.300");  // 2.95 − 3.25
  EXPECT_EQ(table->rows[1][kMetric], "val loss");
}

TEST(FindBaselineRow, NamesTheRowsWhenTheBaselineIsUnknownOrAmbiguous) {
  const std::vector<TrialResult> trials = {Trial(1, "pre_ln", 0, 1, 3.0),
                                           Trial(2, "p_spheret", 0.5, 1, 3.1),
                                           Trial(3, "p_spheret", 2, 1, 3.2)};
  const ResultTable results = AggregateResults(trials, {"val/loss"});
  absl::StatusOr<size_t> unknown = FindBaselineRow(results, "peri_ln");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(unknown.status().message().find("pre_ln, p_spheret p=0.5, p_spheret p=2"),
            std::string::npos)
      << unknown.status();
  EXPECT_EQ(FindBaselineRow(results, "p_spheret").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*FindBaselineRow(results, "p_spheret p=2"), 2u);
  EXPECT_EQ(*FindBaselineRow(results, "pre_ln"), 0u);
}

TEST(Summarize, CarriesTheIntervalAndTheSeeds) {
  const Aggregate a = Summarize({2.0, 4.0, 6.0}, {7, 8, 9});
  // 4 ± t(0.975, 2) · 2 / √3
  EXPECT_NEAR(a.ci_low, 4 - 4.302652729911275 * 2 / std::sqrt(3.0), 1e-9);
  EXPECT_NEAR(a.ci_high, 4 + 4.302652729911275 * 2 / std::sqrt(3.0), 1e-9);
  EXPECT_EQ(a.samples.seeds, (std::vector<int64_t>{7, 8, 9}));
  EXPECT_TRUE(std::isnan(Summarize({1.5}).ci_low));
}

}  // namespace
}  // namespace spheret::client
