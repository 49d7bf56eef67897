// The metric catalog: every name once, each a valid stored name, the looped model's per-loop
// names resolved to their family, and the diag fields the old per-site lists named all present.
#include "protocol/metric_catalog.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "protocol/diag_values.h"
#include "protocol/trial_states.h"

namespace spheret::protocol {
namespace {

TEST(MetricCatalogTest, EveryNameOnceAndEveryDiagFieldAValidFieldName) {
  std::set<std::string> seen;
  for (const MetricInfo& info : MetricCatalog()) {
    EXPECT_TRUE(seen.insert(std::string(info.name)).second) << info.name;
    EXPECT_FALSE(info.label.empty()) << info.name;
    if (info.level != Level::kStep) {
      EXPECT_TRUE(IsDiagFieldName(info.name)) << info.name;
    }
    if (!info.prometheus.empty()) {
      EXPECT_TRUE(info.exported) << info.name;
    }
  }
}

TEST(MetricCatalogTest, FindsNamesAndLoopedFamilies) {
  ASSERT_NE(FindMetric(kValLoss), nullptr);
  EXPECT_EQ(FindMetric(kValLoss)->direction, Direction::kLower);
  EXPECT_EQ(FindMetric(kTokensPerSec)->direction, Direction::kHigher);
  EXPECT_EQ(MetricLabel(kValPpl), "val ppl");
  EXPECT_EQ(MetricLabel(ValLoopLossMetricName(3)), "loop val loss");
  EXPECT_EQ(FindMetric(LoopLossMetricName(12))->name, kTrainLoopLossPrefix);
  EXPECT_EQ(FindMetric("val/loop_loss/x"), nullptr);
  EXPECT_EQ(FindMetric("zeroshot/boolq/acc"), nullptr);
  EXPECT_EQ(MetricLabel("zeroshot/boolq/acc"), "zeroshot/boolq/acc");
}

TEST(MetricCatalogTest, LevelsListTheFieldsOfTheirRows) {
  const std::vector<std::string> model = MetricNames({Level::kModel});
  EXPECT_EQ(model.front(), kDeltaSum);
  EXPECT_EQ(model.back(), kE2eSigmaMin);
  const std::vector<std::string> exported =
      MetricNames({Level::kLayer, Level::kModel, Level::kDyadic}, true);
  EXPECT_EQ(exported.size(), 29u);  // every diag field but min_abs_cos
  for (const std::string& name : exported) EXPECT_NE(name, kMinAbsCos);
  for (const std::string& name : MetricNames({Level::kStep})) EXPECT_NE(name.back(), '/');
}

TEST(MetricCatalogTest, ReadingsComeFromTheCatalog) {
  EXPECT_EQ(DiagFieldReading(kJacSigmaMinLower), FindMetric(kJacSigmaMinLower)->reading);
  EXPECT_EQ(DiagFieldReading(kTheta), "");
  EXPECT_EQ(DiagFieldReading("no_such_field"), "");
}

TEST(TrialStatesTest, NamesRoundTrip) {
  for (TrialState state : kTrialStates) {
    EXPECT_EQ(ParseTrialState(TrialStateName(state)), state);
    EXPECT_TRUE(IsTrialState(TrialStateName(state), state));
  }
  EXPECT_EQ(ParseTrialState("succeeded"), std::nullopt);
  EXPECT_TRUE(IsTerminal(TrialState::kPruned));
  EXPECT_FALSE(IsTerminal(TrialState::kRunning));
  EXPECT_EQ(ParseSweepState(SweepStateName(SweepState::kDone)), SweepState::kDone);
}

TEST(DiagRowWithinDepthTest, RowsOfAModelOfThatDepth) {
  EXPECT_TRUE(DiagRowWithinDepth(4, 4, kMlpSublayer));
  EXPECT_FALSE(DiagRowWithinDepth(4, 5, kAttnSublayer));
  EXPECT_TRUE(DiagRowWithinDepth(4, 0, kModelSublayer));
  EXPECT_TRUE(DiagRowWithinDepth(4, 8, kDyadicSublayer));
  EXPECT_FALSE(DiagRowWithinDepth(0, 1, kAttnSublayer));
}

}  // namespace
}  // namespace spheret::protocol
