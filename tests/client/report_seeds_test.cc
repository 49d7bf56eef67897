// Every cell says what it left out: a sweep with one DIVERGED seed of three in a cell shows the
// cell as "2 of 3; 1 diverged at step 140" in every format (txt, md, tex, csv, json) of `results`,
// the paper's Tables 2-3, `--baseline` and the stability table; a best or second mark on such a
// cell carries a dagger and a note. Before, the cell printed a clean "(2)".
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "client/report/baseline.h"
#include "client/report/paper_layout.h"
#include "client/report/results.h"
#include "client/report/results_format.h"
#include "client/report/seed_account.h"
#include "client/report/stability.h"
#include "client/report/table.h"

namespace spheret::client {
namespace {

using nlohmann::json;

constexpr char kLost[] = "(2 of 3; 1 diverged at step 140)";
constexpr char kLostSeed[] = "seed 3 (trial 6) diverged at step 140";

TrialResult Trial(int64_t id, const std::string& method, int seed, double loss,
                  const std::string& state = "SUCCEEDED", int64_t stop_step = -1) {
  json config = {{"method", method}, {"scale", "S"}, {"seed", seed}, {"dataset", "fineweb_edu"}};
  TrialResult trial{id, *ParseTrialState(state), TrialConfig(config.dump()), {}};
  if (state == "SUCCEEDED") {
    trial.values = {{"val/loss", loss},
                    {"train/loss_avg", loss - 0.01},
                    {"val/ppl", std::exp(loss)},
                    {"train/loss_spikes", 1}};
  }
  trial.stop_step = stop_step;
  trial.stop_step_exact = state == "DIVERGED";
  return trial;
}

// Pre-LN on three seeds; GeoNorm best on two, its third seed DIVERGED at step 140.
std::vector<TrialResult> Sweep() {
  return {Trial(1, "pre_ln", 1, 3.0),  Trial(2, "pre_ln", 2, 3.1),
          Trial(3, "pre_ln", 3, 3.2),  Trial(4, "geonorm", 1, 2.5),
          Trial(5, "geonorm", 2, 2.6), Trial(6, "geonorm", 3, 0, "DIVERGED", 140)};
}

const json* JsonRow(const json& rows, const std::string& key, const std::string& value) {
  for (const json& row : rows) {
    if (row[key] == value) return &row;
  }
  return nullptr;
}

TEST(SeedsLeftOut, ResultsShowTheDivergedSeedInEveryFormat) {
  const ResultTable results = AggregateResults(Sweep(), {"val/loss"});
  const Aggregate& geonorm = results.cells.at("geonorm").at("S").at("val/loss");
  EXPECT_EQ(geonorm.n, 2);
  EXPECT_EQ(geonorm.seeds.total(), 3);
  const Table pivot = PivotTable(results, {});
  ASSERT_EQ(pivot.rows[1][0], "geonorm");
  EXPECT_NE(pivot.rows[1][1].find(kLost), std::string::npos) << pivot.rows[1][1];
  EXPECT_NE(pivot.rows[0][1].find("] (3)"), std::string::npos) << "a whole cell as before";
  const std::string note = std::string("geonorm at S: 2 of 3 seeds counted; ") + kLostSeed;
  for (Format format : {Format::kTable, Format::kMarkdown, Format::kLatex}) {
    const std::string text = Render(pivot, format);
    EXPECT_NE(text.find("2 of 3; 1 diverged at step 140"), std::string::npos) << text;
    EXPECT_NE(text.find(format == Format::kLatex ? "seed 3 (trial 6)" : note), std::string::npos)
        << text;
    EXPECT_NE(text.find("marked although the cell left seeds out"), std::string::npos) << text;
  }
  // The best mark says the cell lost a seed.
  EXPECT_NE(RenderText(pivot).find(std::string(kLost) + " † *"), std::string::npos);
  EXPECT_NE(RenderMarkdown(pivot).find(std::string(kLost) + " †**"), std::string::npos);
  EXPECT_NE(RenderLatex(pivot).find("diverged at step 140) \\dag{}}"), std::string::npos)
      << RenderLatex(pivot);
  const Table long_rows = ResultsTableFor(results, Format::kCsv, {});
  EXPECT_NE(RenderCsv(long_rows).find(std::string(",3,") + kLostSeed + ","), std::string::npos)
      << RenderCsv(long_rows);
  const json rows = json::parse(RenderJson(long_rows));
  const json* row = JsonRow(rows, "method", "geonorm");
  ASSERT_NE(row, nullptr);
  EXPECT_EQ((*row)["n"], 2);
  EXPECT_EQ((*row)["n_total"], 3);
  EXPECT_EQ((*row)["left_out"], kLostSeed);
  EXPECT_EQ((*JsonRow(rows, "method", "pre_ln"))["left_out"], "");
}

TEST(SeedsLeftOut, ARowWhoseEverySeedDivergedIsShownNotDropped) {
  const std::vector<TrialResult> trials = {
      Trial(1, "pre_ln", 1, 3.0), Trial(2, "keel", 1, 0, "DIVERGED", 20),
      Trial(3, "keel", 2, 0, "DIVERGED", 10), Trial(4, "keel", 3, 0, "FAILED", 60)};
  const ResultTable results = AggregateResults(trials, {"val/loss"});
  ASSERT_EQ(results.rows.size(), 2u);
  const Table pivot = PivotTable(results, {});
  EXPECT_EQ(pivot.rows[1][1], "— (0 of 3; 2 diverged at steps 10, 20, 1 failed after step 60)");
  const json rows = json::parse(RenderJson(LongTable(results, {})));
  const json* keel = JsonRow(rows, "method", "keel");
  ASSERT_NE(keel, nullptr);
  EXPECT_EQ((*keel)["n"], 0);
  EXPECT_TRUE((*keel)["mean"].is_null()) << "never 0";
}

TEST(SeedsLeftOut, ASeedCountsWhenAnyOfItsTrialsDidAndAMissingMetricIsNotALoss) {
  // Seed 2 was cancelled in one sweep and run again in another.
  const SeedAccount account = AccountSeeds({{1, 1, TrialState::kSucceeded},
                                            {2, 2, TrialState::kCancelled},
                                            {3, 2, TrialState::kSucceeded},
                                            {4, 3, TrialState::kFailed, 60},
                                            {5, 4, TrialState::kFailed, 80},
                                            {6, 5, TrialState::kPruned, 500}},
                                           {1, 2});
  EXPECT_EQ(SeedCountText(account),
            "(2 of 5; 2 failed after steps 60, 80, 1 pruned after step 500)");
  EXPECT_EQ(LostSeedsText(account),
            "seed 3 (trial 4) failed after step 60; seed 4 (trial 5) failed after step 80; seed 5 "
            "(trial 6) pruned after step 500");
  // A metric no finished trial of the cell has (the method lacks it): a plain "—" where every
  // trial finished; beside a diverged seed, the cell says both.
  const ResultTable results = AggregateResults(Sweep(), {"geometry/alpha_mean"});
  EXPECT_EQ(results.cells.count("pre_ln"), 0u);
  EXPECT_EQ(PivotTable(results, {}).rows[0][1], "—");
  EXPECT_EQ(PivotTable(results, {}).rows[1][1],
            "— (0 of 3; 1 diverged at step 140, 2 without a value)");
}

std::vector<PaperTrial> PaperSweep() {
  std::vector<PaperTrial> trials;
  for (const TrialResult& trial : Sweep()) trials.push_back({trial, "FineWeb-Edu"});
  return trials;
}

TEST(SeedsLeftOut, PaperTables2And3ShowTheDivergedSeedInEveryFormat) {
  for (PaperOutput output : {PaperOutput::kTable2, PaperOutput::kTable3}) {
    absl::StatusOr<PaperTableData> data = BuildPaperTable(output, PaperSweep(), {});
    ASSERT_TRUE(data.ok()) << data.status();
    const Table text = PaperTableText(*data, {});
    ASSERT_EQ(text.rows[4][0], "GeoNorm");
    EXPECT_NE(text.rows[4][1].find(kLost), std::string::npos) << text.rows[4][1];
    EXPECT_TRUE(text.IsBest(4, 1));
    for (Format format : {Format::kTable, Format::kMarkdown, Format::kLatex}) {
      const std::string rendered = Render(text, format);
      EXPECT_NE(rendered.find("2 of 3; 1 diverged at step 140"), std::string::npos) << rendered;
      EXPECT_NE(rendered.find("GeoNorm at FineWeb-Edu S: 2 of 3 seeds counted; seed 3 (trial "
                              "6) diverged at step 140"),
                std::string::npos)
          << rendered;
      EXPECT_NE(rendered.find(format == Format::kLatex ? "\\dag{}" : "†"), std::string::npos);
    }
    const Table long_rows = PaperTableLong(*data);
    EXPECT_NE(RenderCsv(long_rows).find(std::string(",3,") + kLostSeed + ","), std::string::npos)
        << RenderCsv(long_rows);
    const json rows = json::parse(RenderJson(long_rows));
    int lossy = 0;
    for (const json& row : rows) {
      if (row["row"] != "GeoNorm" || row["corpus"] != "FineWeb-Edu" || row["scale"] != "S")
        continue;
      EXPECT_EQ(row["n"], 2);
      EXPECT_EQ(row["n_total"], 3);
      EXPECT_EQ(row["left_out"], kLostSeed);
      ++lossy;
    }
    EXPECT_EQ(lossy, output == PaperOutput::kTable2 ? 2 : 1) << "train and val, or ppl";
  }
}

TEST(SeedsLeftOut, FiguresNameTheSeedsTheirLinesLeaveOut) {
  absl::StatusOr<FigureSeeds> seeds = FigureSeedsOf(PaperOutput::kFigure2, PaperSweep());
  ASSERT_TRUE(seeds.ok()) << seeds.status();
  ASSERT_EQ(seeds->notes.size(), 1u);
  EXPECT_EQ(seeds->notes[0], std::string("GeoNorm at S: 2 of 3 seeds counted; ") + kLostSeed);
  EXPECT_EQ(seeds->cell_of.at(4), "GeoNorm at S");
  EXPECT_EQ(seeds->seeds.count("Pre-LN at S"), 0u);
}

TEST(SeedsLeftOut, BaselineComparisonsSayWhatEachSideLeftOut) {
  const ResultTable results = AggregateResults(Sweep(), {"val/loss"});
  absl::StatusOr<Table> text = BaselineTable(results, "pre_ln", Format::kMarkdown, 3);
  ASSERT_TRUE(text.ok()) << text.status();
  ASSERT_EQ(text->rows.size(), 1u);
  EXPECT_EQ(text->header.back(), "seeds left out");
  EXPECT_EQ(text->rows[0].back(), "geonorm: 2 of 3; 1 diverged at step 140");
  EXPECT_EQ(text->rows[0][4], "2");
  EXPECT_NE(
      RenderMarkdown(*text).find(std::string("geonorm at S: 2 of 3 seeds counted; ") + kLostSeed),
      std::string::npos);
  absl::StatusOr<Table> exact = BaselineTable(results, "pre_ln", Format::kJson, 3);
  ASSERT_TRUE(exact.ok()) << exact.status();
  const json rows = json::parse(RenderJson(*exact));
  EXPECT_EQ(rows[0]["n_total"], 3);
  EXPECT_EQ(rows[0]["n_total pre_ln"], 3);
  EXPECT_EQ(rows[0]["left_out"], kLostSeed);
  EXPECT_EQ(rows[0]["left_out pre_ln"], "");
}

TEST(SeedsLeftOut, TheStabilityTableCountsDivergencesPerRowAndScale) {
  std::vector<TrialResult> trials = Sweep();
  trials.push_back(Trial(7, "geonorm", 1, 0, "DIVERGED", 90));
  nlohmann::json config = trials.back().config.object();
  config["scale"] = "M";
  trials.back().config = TrialConfig(config.dump());
  const ResultTable spikes = AggregateResults(trials, {"train/loss_spikes"});
  const Table text = StabilityTable(spikes, /*exact=*/false, 1);
  ASSERT_EQ(text.rows.size(), 3u) << RenderText(text);
  EXPECT_EQ(text.rows[0], (std::vector<std::string>{"pre_ln", "S", "0 of 3", "1.0 ± 0.0 (3)"}));
  EXPECT_EQ(text.rows[1][2], "1 of 3 (at step 140)");
  EXPECT_EQ(text.rows[1][3], std::string("1.0 ± 0.0 ") + kLost);
  EXPECT_EQ(text.rows[2][2], "1 of 1 (at step 90)");
  EXPECT_NE(std::find(text.notes.begin(), text.notes.end(),
                      "geonorm: diverged 2 of 4 (S 1 of 3, "
                      "M 1 of 1)"),
            text.notes.end())
      << RenderText(text);
  EXPECT_NE(std::find(text.notes.begin(), text.notes.end(), "pre_ln: diverged 0 of 3"),
            text.notes.end());
  const json rows = json::parse(RenderJson(StabilityTable(spikes, /*exact=*/true, 1)));
  EXPECT_EQ(rows[1]["diverged"], 1);
  EXPECT_EQ(rows[1]["n_total"], 3);
  EXPECT_EQ(rows[1]["diverged_steps"], "140");
  const std::vector<std::string> unstable = UnstableRuns(trials, kUnstableMargin);
  EXPECT_NE(
      std::find(unstable.begin(), unstable.end(), "trial 6, geonorm at S: diverged at step 140"),
      unstable.end());
}

}  // namespace
}  // namespace spheret::client
