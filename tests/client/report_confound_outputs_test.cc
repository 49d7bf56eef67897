// Confounds printed, not hidden: every table, figure and comparison that puts rows side by side
// lists the effective config keys that differ between them beyond the row's identity. A default
// sweep (ScaleNorm off for GeoNorm, on for the SpheretNorm rows) prints the scalenorm confound in
// every format of `results`, Tables 2-3, the figures and `--baseline`; a sweep where only the
// method differs prints none; a knob the report code has never heard of (weight_decay set per row,
// as a sweep's `with:` does) is found like any other.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "client/report/baseline.h"
#include "client/report/paper_layout.h"
#include "client/report/results.h"
#include "client/report/results_format.h"
#include "client/report/table.h"

namespace spheret::client {
namespace {

using nlohmann::json;

constexpr char kScaleNorm[] =
    "rows also differ in scalenorm: off for geonorm; on for p_spheret p=0.5, p_spheret p=2";

TrialResult Trial(int64_t id, const std::string& method, double p, int seed, double loss,
                  json extra = json::object()) {
  json config = {{"method", method}, {"scale", "S"}, {"seed", seed}, {"dataset", "fineweb_edu"}};
  if (p > 0) config["p"] = p;
  config.update(extra);
  return {id,
          TrialState::kSucceeded,
          TrialConfig(config.dump()),
          {{"val/loss", loss}, {"train/loss_avg", loss}}};
}

// GeoNorm and two p-SpheretNorm rows on two seeds, every knob at its default.
std::vector<TrialResult> DefaultSweep(json extra = json::object()) {
  std::vector<TrialResult> trials;
  int64_t id = 0;
  for (int seed : {1, 2}) {
    trials.push_back(Trial(++id, "geonorm", 0, seed, 3.0 + 0.01 * seed, extra));
    trials.push_back(Trial(++id, "p_spheret", 0.5, seed, 3.1 + 0.01 * seed, extra));
    trials.push_back(Trial(++id, "p_spheret", 2, seed, 3.2 + 0.01 * seed, extra));
  }
  return trials;
}

bool HasNote(const Table& table, const std::string& text) {
  for (const std::string& note : table.notes) {
    if (note.find(text) != std::string::npos) return true;
  }
  return false;
}

TEST(Confounds, ResultsOfADefaultSweepPrintTheScaleNormConfoundInEveryFormat) {
  const ResultTable results = AggregateResults(DefaultSweep(), {"val/loss"});
  const Table pivot = PivotTable(results, {});
  EXPECT_TRUE(HasNote(pivot, std::string("Confound: ") + kScaleNorm)) << RenderText(pivot);
  for (Format format : {Format::kTable, Format::kMarkdown, Format::kLatex}) {
    EXPECT_NE(Render(pivot, format).find("rows also differ in scalenorm"), std::string::npos);
  }
  const json rows = json::parse(RenderJson(LongTable(results, {})));
  ASSERT_EQ(rows.size(), 3u);
  for (const json& row : rows) {
    EXPECT_EQ(row["confounds"], "scalenorm: off (geonorm); on (p_spheret p=0.5, p_spheret p=2)");
  }
  EXPECT_NE(RenderCsv(LongTable(results, {})).find(",\"scalenorm: off (geonorm); on ("),
            std::string::npos);
}

TEST(Confounds, BaselineComparisonsPrintTheConfoundOfEachPair) {
  const ResultTable results = AggregateResults(DefaultSweep(), {"val/loss"});
  absl::StatusOr<Table> text = BaselineTable(results, "geonorm", Format::kTable, 3);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_TRUE(HasNote(*text,
                      "Confound of p_spheret p=0.5 vs geonorm at S: rows also differ in "
                      "scalenorm: off for geonorm; on for p_spheret p=0.5"))
      << RenderText(*text);
  absl::StatusOr<Table> exact = BaselineTable(results, "geonorm", Format::kCsv, 3);
  ASSERT_TRUE(exact.ok()) << exact.status();
  const json rows = json::parse(RenderJson(*exact));
  EXPECT_EQ(rows[1]["row"], "p_spheret p=2");
  EXPECT_EQ(rows[1]["confounds"], "scalenorm: off (geonorm); on (p_spheret p=2)");
}

TEST(Confounds, ASweepWhereOnlyTheMethodDiffersPrintsNone) {
  // ScaleNorm on for every row: the rows differ in method and p only.
  const ResultTable results = AggregateResults(DefaultSweep({{"scalenorm", true}}), {"val/loss"});
  EXPECT_TRUE(results.confounds.empty());
  const Table pivot = PivotTable(results, {});
  EXPECT_EQ(RenderText(pivot).find("Confound"), std::string::npos) << RenderText(pivot);
  EXPECT_EQ(json::parse(RenderJson(LongTable(results, {})))[0]["confounds"], "");
  absl::StatusOr<Table> compared = BaselineTable(results, "geonorm", Format::kMarkdown, 3);
  ASSERT_TRUE(compared.ok());
  EXPECT_TRUE(compared->notes.empty()) << RenderMarkdown(*compared);
  std::vector<PaperTrial> trials;
  for (const TrialResult& trial : DefaultSweep({{"scalenorm", true}})) {
    trials.push_back({trial, "FineWeb-Edu"});
  }
  absl::StatusOr<PaperTableData> table2 = BuildPaperTable(PaperOutput::kTable2, trials, {});
  ASSERT_TRUE(table2.ok());
  EXPECT_TRUE(table2->confounds.empty());
}

TEST(Confounds, AKnobTheReportHasNeverHeardOfIsFoundLikeAnyOther) {
  // weight_decay set per row (a sweep's `with:` on the method axis): not in the row labels, so a
  // confound, with the rows that have each value.
  std::vector<TrialResult> trials;
  for (int seed : {1, 2}) {
    trials.push_back(Trial(seed, "pre_ln", 0, seed, 3.0, {{"weight_decay", 0.1}}));
    trials.push_back(Trial(10 + seed, "keel", 0, seed, 3.1, {{"weight_decay", 0.05}}));
  }
  const ResultTable results = AggregateResults(trials, {"val/loss"});
  ASSERT_EQ(results.rows.size(), 2u);
  EXPECT_EQ(results.rows[1].label, "keel") << "weight_decay follows the method: not in the label";
  ASSERT_EQ(results.confounds.size(), 1u);
  EXPECT_EQ(ConfoundSentence(results.confounds[0]),
            "rows also differ in weight_decay: 0.1 for pre_ln; 0.05 for keel");
  // Where the knob varies within a method, it names the rows and is their identity instead.
  trials.push_back(Trial(21, "pre_ln", 0, 1, 3.0, {{"weight_decay", 0.05}}));
  const ResultTable ablation = AggregateResults(trials, {"val/loss"});
  EXPECT_EQ(ablation.rows[0].label, "pre_ln weight_decay=0.05");
  EXPECT_TRUE(ablation.confounds.empty());
}

TEST(Confounds, PaperTablesAndFiguresOfADefaultSweepPrintTheScaleNormConfound) {
  std::vector<PaperTrial> trials;
  for (const TrialResult& trial : DefaultSweep()) trials.push_back({trial, "FineWeb-Edu"});
  const std::string sentence =
      "Confound: rows also differ in scalenorm: off for GeoNorm; on for p-SpheretNorm (p=0.5), "
      "p-SpheretNorm (p=2)";
  for (PaperOutput output : {PaperOutput::kTable2, PaperOutput::kTable3}) {
    absl::StatusOr<PaperTableData> data = BuildPaperTable(output, trials, {});
    ASSERT_TRUE(data.ok()) << data.status();
    const Table text = PaperTableText(*data, {});
    for (Format format : {Format::kTable, Format::kMarkdown}) {
      EXPECT_NE(Render(text, format).find(sentence), std::string::npos) << Render(text, format);
    }
    EXPECT_NE(RenderLatex(text).find("rows also differ in scalenorm"), std::string::npos);
    for (const json& row : json::parse(RenderJson(PaperTableLong(*data)))) {
      const bool ours = row["corpus"] == "FineWeb-Edu" && row["scale"] == "S";
      EXPECT_EQ(row["confounds"], ours ? "scalenorm: off (GeoNorm); on (p-SpheretNorm (p=0.5), "
                                         "p-SpheretNorm (p=2))"
                                       : "")
          << row.dump();
    }
  }
  absl::StatusOr<FigureSeeds> figure = FigureSeedsOf(PaperOutput::kFigure2, trials);
  ASSERT_TRUE(figure.ok()) << figure.status();
  ASSERT_EQ(figure->notes.size(), 1u);
  EXPECT_EQ(figure->notes[0], sentence);
  EXPECT_EQ(figure->confounds.at("S"),
            "scalenorm: off (GeoNorm); on (p-SpheretNorm (p=0.5), p-SpheretNorm (p=2))");
}

}  // namespace
}  // namespace spheret::client
