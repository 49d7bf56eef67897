// The paper's layouts across sweeps: data set x scale columns, knobs linked to the scale, the best
// of each column marked, unstable runs, and the geometry summaries, against values computed here.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "client/report/geometry.h"
#include "client/report/results.h"
#include "client/report/results_format.h"
#include "client/report/stability.h"
#include "client/report/table.h"

namespace spheret::client {
namespace {

using nlohmann::json;

TrialResult Trial(int64_t id, const std::string& method, const std::string& scale,
                  const std::string& dataset, double train_loss, json extra = json::object(),
                  const std::string& state = "SUCCEEDED") {
  json config = {{"method", method}, {"scale", scale}, {"seed", 1337}, {"dataset", dataset}};
  config.update(extra);
  return {
      id, *ParseTrialState(state), TrialConfig(config.dump()), {{"train/loss_avg", train_loss}}};
}

TEST(PaperLayout, ColumnsAreDataSetTimesScaleAndLinkedKnobsDoNotSplitRows) {
  const std::vector<TrialResult> trials = {
      Trial(1, "pre_ln", "S", "openwebtext", 3.1, {{"learning_rate", 6e-4}}),
      Trial(2, "pre_ln", "M", "openwebtext", 3.0, {{"learning_rate", 3e-4}}),
      Trial(3, "pre_ln", "S", "data/fineweb_edu", 3.2, {{"learning_rate", 6e-4}}),
      Trial(4, "geonorm", "S", "data/fineweb_edu", 3.4, {{"learning_rate", 6e-4}}),
      Trial(5, "geonorm", "M", "openwebtext", 2.9, {{"learning_rate", 3e-4}})};
  const ResultTable table = AggregateResults(trials, {"train/loss_avg"});
  ASSERT_EQ(table.rows.size(), 2u) << "the learning rate follows the scale: one row per method";
  EXPECT_EQ(table.rows[0].label, "pre_ln");
  EXPECT_EQ(table.scales,
            (std::vector<std::string>{"data/fineweb_edu S", "openwebtext S", "openwebtext M"}))
      << "FineWeb-Edu first, as the paper";
  EXPECT_EQ(table.columns.at("openwebtext M").scale, "M");
  EXPECT_EQ(PaperDatasetOf("data/fineweb_edu", "x"), "FineWeb-Edu");
  EXPECT_EQ(PaperDatasetOf("owt", "x"), "OpenWebText");
  EXPECT_EQ(PaperDatasetOf("fortunes", "FineWeb-Edu"), "FineWeb-Edu");

  const PaperNumbers paper = PaperNumbers::Parse(
      "dataset,scale,method,p,metric,value\nOpenWebText,M,pre_ln,,train_loss,2.5\n"
      "FineWeb-Edu,S,pre_ln,,train_loss,3.057\n");
  ResultFormatOptions options;
  options.paper = &paper;
  const Table pivot = PivotTable(table, options);
  ASSERT_EQ(pivot.header.size(), 7u);
  EXPECT_EQ(pivot.header[6], "openwebtext M (paper)");
  EXPECT_EQ(pivot.rows[0][2], "3.057") << "FineWeb-Edu's number beside the fineweb_edu column";
  EXPECT_EQ(pivot.rows[0][6], "2.500") << "OpenWebText's beside openwebtext";
  // Best (lowest) per column: pre_ln at fineweb S (3.2 < 3.4), geonorm at openwebtext M.
  EXPECT_TRUE(pivot.IsBest(0, 1));
  EXPECT_FALSE(pivot.IsBest(1, 1));
  EXPECT_TRUE(pivot.IsBest(1, 5));
  EXPECT_NE(RenderMarkdown(pivot).find("| **3.200 (1)** |"), std::string::npos);
  EXPECT_NE(RenderLatex(pivot).find("\\textbf{2.900 (1)}"), std::string::npos);
  EXPECT_NE(RenderText(pivot).find("3.200 (1) *"), std::string::npos);
}

TEST(PaperLayout, KnobsLinkedToTheMethodDoNotSplitRowsButAnAblatedKnobDoes) {
  // The paper sweeps pin ScaleNorm per method: off for geonorm, on for p_spheret.
  const std::vector<TrialResult> linked = {
      Trial(1, "geonorm", "S", "fw", 3.1, {{"scalenorm", false}}),
      Trial(2, "p_spheret", "S", "fw", 3.0, {{"scalenorm", true}, {"p", 2.0}}),
      Trial(3, "p_spheret", "S", "fw", 3.0, {{"scalenorm", true}, {"p", 0.5}})};
  const ResultTable table = AggregateResults(linked, {"train/loss_avg"});
  ASSERT_EQ(table.rows.size(), 3u);
  EXPECT_EQ(table.rows[0].label, "geonorm");
  EXPECT_EQ(table.rows[1].label, "p_spheret p=0.5");
  // The ScaleNorm ablation varies it within a method: then it names the rows.
  const std::vector<TrialResult> ablated = {
      Trial(1, "geonorm", "S", "fw", 3.1, {{"scalenorm", false}}),
      Trial(2, "geonorm", "S", "fw", 3.0, {{"scalenorm", true}})};
  const ResultTable ablation = AggregateResults(ablated, {"train/loss_avg"});
  ASSERT_EQ(ablation.rows.size(), 2u);
  EXPECT_EQ(ablation.rows[0].label, "geonorm scalenorm=false");
}

TEST(PaperLayout, UnstableRunsEndFarAboveTheirScalesMedianOrDiverged) {
  std::vector<TrialResult> trials = {Trial(1, "pre_ln", "S", "fw", 3.0),
                                     Trial(2, "geonorm", "S", "fw", 3.2),
                                     Trial(3, "peri_ln", "S", "fw", 3.1),
                                     Trial(4, "keel", "S", "fw", 7.6),
                                     Trial(5, "keel", "M", "fw", 3.0),
                                     Trial(6, "pre_dyt", "S", "fw", 0, json::object(), "DIVERGED")};
  trials[3].values["train/loss_spikes"] = 3;
  const std::vector<std::string> unstable = UnstableRuns(trials, kUnstableMargin);
  ASSERT_EQ(unstable.size(), 2u);
  // The median of S's four finished runs is (3.1 + 3.2) / 2 = 3.15.
  EXPECT_EQ(unstable[0],
            "trial 4, keel at S: final train loss 7.600, 4.450 above the median 3.150 of its "
            "scale; 3 loss spikes");
  EXPECT_EQ(unstable[1], "trial 6, pre_dyt at S: diverged");
}

TEST(Geometry, DepthProfilesAndSummariesFromDiagSeries) {
  const TrialConfig sphere(json{{"method", "geonorm"}, {"scale", "xs"}, {"angle_max", 0.5}}.dump());
  std::map<std::string, std::vector<DiagSeries>> by_field;
  by_field["hidden_norm"] = {{1, sphere, 1, "attn", {0, 10, 20}, {1.0, 1.0, 1.0}},
                             {1, sphere, 1, "mlp", {0, 10, 20}, {2.0, 4.0, 3.0}},
                             {1, sphere, 2, "attn", {0, 10}, {5.0, std::nan("")}}};
  by_field["theta"] = {{1, sphere, 1, "attn", {0, 10}, {0.5, 0.1}},
                       {1, sphere, 1, "mlp", {0, 10}, {0.3, 0.5}}};
  by_field["delta_sum"] = {{1, sphere, 0, "model", {0, 10}, {0.2, 0.4}}};
  by_field["token_cos"] = {{1, sphere, 1, "attn", {0, 10}, {0.95, 0.5}},
                           {1, sphere, 2, "mlp", {0, 10}, {0.3, 0.9}}};
  absl::StatusOr<std::vector<CurveInput>> profile = DepthProfiles(by_field["hidden_norm"], "mean");
  ASSERT_TRUE(profile.ok());
  ASSERT_EQ(profile->size(), 1u);
  EXPECT_EQ((*profile)[0].steps, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ((*profile)[0].values, (std::vector<double>{1.0, 3.0, 5.0}));
  EXPECT_FALSE(DepthProfiles(by_field["theta"], "median").ok());
  std::vector<TrialResult> trials = {{1, TrialState::kSucceeded, sphere, {}}};
  AddGeometrySummaries(by_field, &trials);
  const auto& v = trials[0].values;
  EXPECT_DOUBLE_EQ(v.at("geometry/hidden_norm_last"), (1.0 + 3.0 + 5.0) / 3);
  EXPECT_DOUBLE_EQ(v.at("geometry/hidden_norm_drift"), 2.0) << "mlp 1: 4 / 2";
  EXPECT_DOUBLE_EQ(v.at("geometry/theta_mean"), 1.4 / 4);
  EXPECT_DOUBLE_EQ(v.at("geometry/theta_max"), 0.5);
  EXPECT_DOUBLE_EQ(v.at("geometry/at_cap_percent"), 50.0) << "2 of 4 rows at angle_max 0.5";
  EXPECT_EQ(v.count("geometry/alpha_mean"), 0u);
  EXPECT_DOUBLE_EQ(v.at("geometry/delta_sum_mean"), 0.3) << "S over the logged steps";
  EXPECT_DOUBLE_EQ(v.at("geometry/token_cos_max"), 0.9) << "the most collapsed last row";
  // The geometry table's labels in LaTeX: plain pdflatex knows no Greek letters or ‖ in text.
  const Table table = MetricColumnsTable(AggregateResults(trials, GeometryMetrics()), {});
  const std::string latex = RenderLatex(table);
  EXPECT_NE(latex.find("$\\|$h$\\|$ final & $\\|$h$\\|$ drift & $\\theta$ mean"), std::string::npos)
      << latex;
  EXPECT_EQ(latex.find("θ"), std::string::npos);
  for (const char* raw : {"Σ", "Δ", "²"}) EXPECT_EQ(latex.find(raw), std::string::npos) << raw;
}

// The share at the angle cap: the trainer's per-token at_cap (mean over rows) when recorded,
// else today's count of rows whose mean angle reached the cap; "angle_max": "none" (the
// uncapped update) has no cap, so no share, and never throws.
TEST(Geometry, AtCapFromTheTrainersShareElseFromTheConfigsCap) {
  const TrialConfig capped(json{{"method", "p_spheret"}, {"p", 4}, {"angle_max", 0.5}}.dump());
  const TrialConfig uncapped(json{{"method", "p_spheret"}, {"p", 4}, {"angle_max", "none"}}.dump());
  std::map<std::string, std::vector<DiagSeries>> by_field;
  by_field["theta"] = {{1, capped, 1, "attn", {0, 10}, {0.5, 0.1}},
                       {2, uncapped, 1, "attn", {0, 10}, {2.5, 0.1}},
                       {3, uncapped, 1, "attn", {0, 10}, {2.5, 0.1}}};
  by_field["at_cap"] = {{1, capped, 1, "attn", {0, 10}, {0.25, 0.75}},
                        {1, capped, 1, "mlp", {0, 10}, {0.0, std::nan("")}},
                        {3, uncapped, 1, "attn", {0, 10}, {0.0, 0.0}}};
  std::vector<TrialResult> trials = {{1, TrialState::kSucceeded, capped, {}},
                                     {2, TrialState::kSucceeded, uncapped, {}},
                                     {3, TrialState::kSucceeded, uncapped, {}}};
  AddGeometrySummaries(by_field, &trials);
  EXPECT_DOUBLE_EQ(trials[0].values.at("geometry/at_cap_percent"), 100.0 / 3)
      << "mean of 0.25, 0.75, 0 (NaN left out), not the 50% of rows at the cap";
  EXPECT_EQ(trials[1].values.count("geometry/at_cap_percent"), 0u) << "uncapped, no share";
  EXPECT_DOUBLE_EQ(trials[1].values.at("geometry/theta_max"), 2.5);
  EXPECT_DOUBLE_EQ(trials[2].values.at("geometry/at_cap_percent"), 0.0);
}

// Rows off the attn/mlp grid sit on the same axis of updates: dyadic m at m, model at 0.
TEST(Geometry, DepthIndexOfEverySublayer) {
  EXPECT_EQ(DepthIndex(1, "attn"), 1);
  EXPECT_EQ(DepthIndex(1, "mlp"), 2);
  EXPECT_EQ(DepthIndex(12, "mlp"), 24);
  EXPECT_EQ(DepthIndex(5, "dyadic"), 5);
  EXPECT_EQ(DepthIndex(0, "model"), 0);
}

}  // namespace
}  // namespace spheret::client
