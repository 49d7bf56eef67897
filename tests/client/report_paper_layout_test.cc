// The paper's Tables 2-5 and Figures 2-3 (`spheret report --paper`) from trials of known values:
// 2 corpora x 3 scales x 8 rows x 3 seeds of losses, and zero-shot scores of the L models. Each
// table is checked cell by cell against values computed here: the order of rows and columns, the
// bold and underlined cells (ties included), the average column and the "–" cells with their
// notes.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "client/report/paper_layout.h"
#include "client/report/results_format.h"
#include "client/report/stats.h"
#include "client/report/table.h"

namespace spheret::client {
namespace {

using nlohmann::json;

const std::vector<std::string> kRows = {"Pre-LN",
                                        "Pre-DyT",
                                        "Peri-LN",
                                        "Keel",
                                        "GeoNorm",
                                        "p-SpheretNorm (p=0.5)",
                                        "p-SpheretNorm (p=1)",
                                        "p-SpheretNorm (p=2)"};
const std::vector<std::string> kScales = {"S", "M", "L"};
const std::vector<std::string> kCorpora = {"FineWeb-Edu", "OpenWebText"};
const std::vector<int64_t> kSeeds = {1337, 1338, 1339};
const std::vector<std::string> kAccuracies = {
    "arc_challenge/acc_norm", "arc_easy/acc_norm",   "boolq/acc",     "hellaswag/acc_norm",
    "lambada_openai/acc",     "openbookqa/acc_norm", "piqa/acc_norm", "sciq/acc",
    "social_iqa/acc",         "winogrande/acc"};

json ConfigOf(size_t row, const std::string& scale, int64_t seed, const std::string& dataset) {
  static const char* kMethods[] = {"pre_ln", "pre_dyt", "peri_ln", "keel", "geonorm"};
  json config = {{"scale", scale}, {"seed", seed}, {"dataset", dataset}};
  if (row < 5) {
    config["method"] = kMethods[row];
  } else if (row == 6) {
    config["method"] = "proj_spheret";  // the paper's p = 1 row
  } else {
    config["method"] = "p_spheret";
    config["p"] = row == 5 ? 0.5 : 2.0;
  }
  return config;
}

// Train loss of (row, corpus, scale, seed k): Pre-LN lowest, except that Keel ties Pre-LN at
// FineWeb-Edu S; val loss = train + 0.02.
double TrainLoss(size_t row, size_t corpus, size_t scale, size_t k) {
  const size_t rank = (corpus == 0 && scale == 0 && row == 3) ? 0 : row;
  return 3.0 + 0.01 * rank + 0.1 * corpus - 0.1 * scale + 0.001 * k;
}
// Zero-shot accuracy of task t: p = 2 best, p = 1 second; perplexities 20 - row (p = 2 lowest).
double Accuracy(size_t row, size_t task, size_t k) { return 30 + row + 0.5 * task + 0.1 * k; }

class PaperLayoutTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int64_t id = 0;
    for (size_t c = 0; c < kCorpora.size(); ++c) {
      // The data set names the corpus for FineWeb-Edu; OpenWebText's trials train on "fortunes"
      // and stand for it by their sweep's name, as the CPU twins do.
      const std::string dataset = c == 0 ? "data/fineweb_edu" : "fortunes";
      for (size_t s = 0; s < kScales.size(); ++s) {
        for (size_t r = 0; r < kRows.size(); ++r) {
          for (size_t k = 0; k < kSeeds.size(); ++k) {
            TrialResult trial;
            trial.trial_id = ++id;
            trial.config = TrialConfig(ConfigOf(r, kScales[s], kSeeds[k], dataset).dump());
            // GeoNorm at OpenWebText L failed on every seed.
            trial.state =
                (c == 1 && s == 2 && r == 4) ? TrialState::kFailed : TrialState::kSucceeded;
            if (trial.state == TrialState::kSucceeded) {
              trial.values["train/loss_avg"] = TrainLoss(r, c, s, k);
              trial.values["val/loss"] = TrainLoss(r, c, s, k) + 0.02;
              trial.values["val/ppl"] = std::exp(TrainLoss(r, c, s, k) + 0.02);
            }
            const std::string sweep = c == 0 ? "table2-fineweb-edu" : "table3-openwebtext-cpu";
            trials_.push_back({trial, CorpusOf(trial.config, sweep)});
            if (s != 2) continue;
            // The zero-shot sweep trains the L models again with `eval:` (trial id + 1000): its
            // trials count once in Tables 2-3 and alone in Tables 4-5. Peri-LN on FineWeb-Edu
            // was not scored.
            json config = trial.config.object();
            config["eval_tasks"] = "arc_easy,boolq";
            trial.config = TrialConfig(config.dump());
            trial.trial_id += 1000;
            if (trial.state == TrialState::kSucceeded && !(c == 0 && r == 2)) {
              for (size_t t = 0; t < kAccuracies.size(); ++t) {
                trial.values["zeroshot/" + kAccuracies[t]] = Accuracy(r, t, k);
              }
              trial.values["zeroshot/lambada_openai/perplexity"] = 20.0 - r + 0.01 * k;
              trial.values["zeroshot/wikitext/word_perplexity"] = 40.0 - r + 0.01 * k;
            }
            const std::string zero_shot =
                c == 0 ? "table4-fineweb-edu" : "table5-openwebtext-zeroshot-cpu";
            trials_.push_back({trial, CorpusOf(trial.config, zero_shot)});
          }
        }
      }
    }
  }

  Table Build(PaperOutput output, PaperTableData* data = nullptr) {
    absl::StatusOr<PaperTableData> built = BuildPaperTable(output, trials_, options_);
    EXPECT_TRUE(built.ok()) << built.status();
    if (data != nullptr) *data = *built;
    return PaperTableText(*built, options_);
  }

  std::vector<PaperTrial> trials_;
  PaperTableOptions options_;
};

// "mean ± std [lo, hi] (3)" of three values, as the tables print them.
std::string CellText(const std::vector<double>& values, int decimals) {
  const Description d = Describe(values);
  return FormatNumber(d.mean, decimals) + " ± " + FormatNumber(d.std, decimals) + " [" +
         FormatNumber(d.ci_low, decimals) + ", " + FormatNumber(d.ci_high, decimals) + "] (3)";
}

TEST_F(PaperLayoutTest, CorpusComesFromTheDataSetElseTheSweepsName) {
  EXPECT_EQ(trials_.front().corpus, "FineWeb-Edu");
  EXPECT_EQ(trials_.back().corpus, "OpenWebText");
  EXPECT_EQ(CorpusOf(TrialConfig(R"({"dataset":"fortunes"})"), "demo"), "fortunes");
}

TEST_F(PaperLayoutTest, Table2IsTrainAndValLossOverBothCorporaCellByCell) {
  const Table table = Build(PaperOutput::kTable2);
  ASSERT_EQ(table.header.size(), 1u + 2 * 3 * 2);
  EXPECT_EQ(table.header[0], "method");
  EXPECT_EQ(table.header[1], "FineWeb-Edu S train ↓");
  EXPECT_EQ(table.header[2], "FineWeb-Edu S val ↓");
  EXPECT_EQ(table.header[6], "FineWeb-Edu L val ↓");
  EXPECT_EQ(table.header[7], "OpenWebText S train ↓");
  EXPECT_EQ(table.header[12], "OpenWebText L val ↓");
  ASSERT_EQ(table.rows.size(), kRows.size());
  for (size_t r = 0; r < kRows.size(); ++r) {
    EXPECT_EQ(table.rows[r][0], kRows[r]);
    for (size_t c = 0; c < 2; ++c) {
      for (size_t s = 0; s < 3; ++s) {
        const size_t column = 1 + c * 6 + s * 2;
        if (c == 1 && s == 2 && r == 4) {  // every seed FAILED (in both sweeps): said in the cell
          EXPECT_EQ(table.rows[r][column], "– (0 of 3; 3 failed)");
          EXPECT_EQ(table.rows[r][column + 1], "– (0 of 3; 3 failed)");
          continue;
        }
        std::vector<double> train, val;
        for (size_t k = 0; k < 3; ++k) {
          train.push_back(TrainLoss(r, c, s, k));
          val.push_back(TrainLoss(r, c, s, k) + 0.02);
        }
        EXPECT_EQ(table.rows[r][column], CellText(train, 3)) << kRows[r] << " " << column;
        EXPECT_EQ(table.rows[r][column + 1], CellText(val, 3)) << kRows[r] << " " << column;
      }
    }
  }
  // FineWeb-Edu S: Keel ties Pre-LN for the best (both bold), Pre-DyT second.
  EXPECT_TRUE(table.IsBest(0, 1));
  EXPECT_TRUE(table.IsBest(3, 1));
  EXPECT_TRUE(table.IsSecond(1, 1));
  EXPECT_EQ(table.best.size(), 12u + 2) << "one best a column, two where Keel ties";
  EXPECT_EQ(table.second.size(), 12u);
  EXPECT_TRUE(table.IsBest(0, 12));
  EXPECT_TRUE(table.IsSecond(1, 12));
  const std::string markdown = RenderMarkdown(table);
  EXPECT_NE(markdown.find("| **" + CellText({3.0, 3.001, 3.002}, 3) + "** | **"), std::string::npos)
      << markdown;
  EXPECT_NE(markdown.find("<u>" + CellText({3.01, 3.011, 3.012}, 3) + "</u>"), std::string::npos);
  EXPECT_NE(markdown.find("– GeoNorm at OpenWebText L: trial 133 is FAILED; trial 1133 is FAILED; "
                          "trial 134 is FAILED; trial 1134 is FAILED; trial 135 is FAILED; trial "
                          "1135 is FAILED"),
            std::string::npos)
      << markdown;
  // The zero-shot sweep's L trials repeat the loss sweep's training: counted once, and said.
  EXPECT_NE(markdown.find("Left out: 45 trial(s) trained exactly as an earlier trial of their cell "
                          "and seed (only zero-shot evaluation differs), counted once: trials "
                          "1049, 1050,"),
            std::string::npos)
      << markdown;
  EXPECT_NE(RenderText(table).find(" +"), std::string::npos) << "second's marker in text";
}

TEST_F(PaperLayoutTest, Table2sLatexGroupsTheCorporaAndScalesOverShortNames) {
  const Table table = Build(PaperOutput::kTable2);
  const std::string latex = RenderLatex(table);
  EXPECT_NE(latex.find("\\toprule\n & \\multicolumn{6}{c}{FineWeb-Edu} & "
                       "\\multicolumn{6}{c}{OpenWebText} \\\\\n\\cmidrule(lr){2-7}"
                       "\\cmidrule(lr){8-13}\n"),
            std::string::npos)
      << latex;
  EXPECT_NE(latex.find(" & \\multicolumn{2}{c}{S} & \\multicolumn{2}{c}{M}"), std::string::npos);
  EXPECT_NE(latex.find("method & train $\\downarrow$ & val $\\downarrow$ & train"),
            std::string::npos)
      << "the short names under the groups";
  EXPECT_NE(latex.find("\\toprule"), std::string::npos);
  EXPECT_NE(latex.find("\\underline{"), std::string::npos);
  EXPECT_NE(latex.find("$\\downarrow$"), std::string::npos);
}

TEST_F(PaperLayoutTest, Table3IsPerplexityWithTwoDecimalsAndTheMissingTrialsNamed) {
  PaperTableData data;
  const Table table = Build(PaperOutput::kTable3, &data);
  ASSERT_EQ(table.header.size(), 1u + 2 * 3);
  EXPECT_EQ(table.header[4], "OpenWebText S ppl ↓");
  std::vector<double> ppl;
  for (size_t k = 0; k < 3; ++k) ppl.push_back(std::exp(TrainLoss(7, 1, 1, k) + 0.02));
  EXPECT_EQ(table.rows[7][5], CellText(ppl, 2));
  EXPECT_EQ(table.rows[4][6], "– (0 of 3; 3 failed)");
  ASSERT_EQ(data.notes.size(), 4u) << "the last: the default configs' ScaleNorm confound";
  EXPECT_EQ(data.notes[1],
            "– GeoNorm at OpenWebText L: trial 133 is FAILED; trial 1133 is FAILED; trial 134 is "
            "FAILED; trial 1134 is FAILED; trial 135 is FAILED; trial 1135 is FAILED");
  const Table long_rows = PaperTableLong(data);
  EXPECT_EQ(long_rows.rows.size(), 8u * 6);
  EXPECT_EQ(long_rows.rows[4 * 6 + 5][4], "0") << "n of the missing cell";
  EXPECT_EQ(long_rows.rows[4 * 6 + 5][5], "") << "never 0";
}

TEST_F(PaperLayoutTest, Tables4And5HaveThePapersTwelveColumnsAndOurAverage) {
  for (PaperOutput output : {PaperOutput::kTable4, PaperOutput::kTable5}) {
    PaperTableData data;
    const Table table = Build(output, &data);
    const std::vector<std::string> header = {
        "method",          "ARC-C acc_n ↑",     "ARC-E acc_n ↑",
        "BoolQ acc ↑",     "HellaSwag acc_n ↑", "LAMBADA acc ↑",
        "OBQA acc_n ↑",    "PIQA acc_n ↑",      "SciQ acc ↑",
        "SocialIQa acc ↑", "WinoGrande acc ↑",  "LAMBADA ppl ↓",
        "WikiText ppl ↓",  "Avg. acc ↑ (ours)"};
    EXPECT_EQ(table.header, header);
    const bool fineweb = output == PaperOutput::kTable4;
    EXPECT_EQ(data.title, fineweb ? "Table 4: zero-shot results of the L models trained on "
                                    "FineWeb-Edu"
                                  : "Table 5: zero-shot results of the L models trained on "
                                    "OpenWebText");
    for (size_t r = 0; r < kRows.size(); ++r) {
      const bool missing = (fineweb && r == 2) || (!fineweb && r == 4);
      // Peri-LN was not scored ("–"); GeoNorm's seeds FAILED (said in the cell).
      const std::string dash = fineweb ? "–" : "– (0 of 3; 3 failed)";
      for (size_t t = 0; t < 10; ++t) {
        const std::vector<double> values = {Accuracy(r, t, 0), Accuracy(r, t, 1),
                                            Accuracy(r, t, 2)};
        EXPECT_EQ(table.rows[r][1 + t], missing ? dash : CellText(values, 2));
      }
      EXPECT_EQ(table.rows[r][11], missing ? dash : CellText({20.0 - r, 20.01 - r, 20.02 - r}, 2));
      // The average of the ten accuracies per seed, then over seeds.
      std::vector<double> average(3, 0.0);
      for (size_t k = 0; k < 3; ++k) {
        for (size_t t = 0; t < 10; ++t) average[k] += Accuracy(r, t, k) / 10;
      }
      EXPECT_EQ(table.rows[r][13], missing ? dash : CellText(average, 2));
    }
    // Higher accuracy is better: p = 2 bold, p = 1 underlined; lower perplexity likewise.
    for (size_t column = 1; column <= 13; ++column) {
      EXPECT_TRUE(table.IsBest(7, column)) << column;
      EXPECT_TRUE(table.IsSecond(6, column)) << column;
    }
    EXPECT_EQ(table.best.size(), 13u);
    const std::string reason =
        fineweb ? "– Peri-LN at FineWeb-Edu L: trial 1055 has no zero-shot scores; trial 1056 has "
                  "no zero-shot scores; trial 1057 has no zero-shot scores"
                : "– GeoNorm at OpenWebText L: trial 1133 is FAILED; trial 1134 is FAILED; trial "
                  "1135 is FAILED";
    EXPECT_EQ(data.notes.size(), 4u)
        << "what the cells are, the scores, one line for the row, the confound";
    EXPECT_EQ(data.notes[2], reason);
    // Default configs: ScaleNorm is on for the SpheretNorm rows and off for the others.
    EXPECT_EQ(data.notes.back(),
              "Confound: rows also differ in scalenorm: off for Pre-LN, Pre-DyT, Peri-LN, Keel, "
              "GeoNorm; on for p-SpheretNorm (p=0.5), p-SpheretNorm (p=1), p-SpheretNorm (p=2)");
  }
}

TEST_F(PaperLayoutTest, TrialsWithoutScoresGiveOneNoteNotOneACell) {
  for (PaperTrial& trial : trials_) {
    for (auto it = trial.result.values.begin(); it != trial.result.values.end();) {
      it = it->first.rfind("zeroshot/", 0) == 0 ? trial.result.values.erase(it) : std::next(it);
    }
  }
  PaperTableData data;
  const Table table = Build(PaperOutput::kTable4, &data);
  EXPECT_EQ(table.rows[0][1], "–");
  EXPECT_TRUE(table.best.empty());
  ASSERT_EQ(data.notes.size(), 4u);
  EXPECT_EQ(data.notes[2],
            "– FineWeb-Edu L: no trial of the given sweeps has zero-shot scores (a sweep's eval: "
            "block or spheret-lm eval scores them; docs/zero-shot.md)");
}

TEST_F(PaperLayoutTest, VsPaperShowsThePublishedValueInEachCell) {
  const PaperNumbers& paper = PaperNumbers::Embedded();
  options_.paper = &paper;
  const Table table = Build(PaperOutput::kTable2);
  EXPECT_NE(table.rows[0][2].find("[paper 3.071]"), std::string::npos) << table.rows[0][2];
  const Table zero_shot = Build(PaperOutput::kTable4);
  EXPECT_NE(zero_shot.rows[0][1].find("[paper 26.54]"), std::string::npos) << zero_shot.rows[0][1];
  EXPECT_NE(zero_shot.rows[0][13].find("[paper –]"), std::string::npos) << "the average is ours";
}

TEST_F(PaperLayoutTest, ACellFilledTwiceByDifferentTrainingIsRefusedNamingBothTrials) {
  trials_.push_back(trials_.front());
  trials_.back().result.trial_id = 999;
  json config = trials_.back().result.config.object();
  config["learning_rate"] = 0.001;  // an ablation's trial beside the table's
  trials_.back().result.config = TrialConfig(config.dump());
  absl::StatusOr<PaperTableData> built = BuildPaperTable(PaperOutput::kTable2, trials_, options_);
  ASSERT_FALSE(built.ok());
  EXPECT_EQ(built.status().message(),
            "trials 1 and 999 both fill Pre-LN at FineWeb-Edu S with seed 1337 but trained "
            "differently (an ablation varies another knob): give the sweeps that hold each cell "
            "once");
  config.erase("learning_rate");  // the same training again: counted once, and said
  trials_.back().result.config = TrialConfig(config.dump());
  built = BuildPaperTable(PaperOutput::kTable2, trials_, options_);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(built->cells.front().stats.n, 3);
  const std::string& left_out = built->notes[built->notes.size() - 2];  // before the confound
  EXPECT_NE(left_out.find("trials 1049, "), std::string::npos);
  EXPECT_NE(left_out.find(", 999"), std::string::npos) << left_out;
}

TEST_F(PaperLayoutTest, FiguresTakeOneCorpussTrialsAndNamesParse) {
  // FineWeb-Edu's 72 trials; the zero-shot sweep's repeats of its L models are drawn once.
  EXPECT_EQ(FigureTrials(PaperOutput::kFigure2, trials_)->size(), 72u);
  EXPECT_EQ(FigureTrials(PaperOutput::kFigure3, trials_)->front(), 73);
  // OpenWebText's: GeoNorm at L FAILED on its three seeds, not drawn (the tables count it neither).
  EXPECT_EQ(FigureTrials(PaperOutput::kFigure3, trials_)->size(), 69u);
  EXPECT_EQ(*ParsePaperOutput("figure3"), PaperOutput::kFigure3);
  EXPECT_FALSE(ParsePaperOutput("table9").ok());
  EXPECT_FALSE(BuildPaperTable(PaperOutput::kFigure2, trials_, options_).ok());
}

TEST_F(PaperLayoutTest, ZeroShotTablesShowLEvenWhenOnlySAndMWereScored) {
  std::vector<PaperTrial> small;
  for (const PaperTrial& trial : trials_) {
    if (trial.result.config.KnobText("scale") != "L") small.push_back(trial);
  }
  for (PaperTrial& trial : small) trial.result.values["zeroshot/boolq/acc"] = 50;
  absl::StatusOr<PaperTableData> data = BuildPaperTable(PaperOutput::kTable4, small, options_);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->cells.front().scale, "L");
  EXPECT_EQ(data->cells.front().stats.n, 0);
  EXPECT_EQ(data->notes[data->notes.size() - 2], "– FineWeb-Edu L: no trial in the given sweeps");
}

TEST(RankColumn, TiesAsPrintedShareAMarkAndMissingValuesAreNeverMarked) {
  const double nan = std::nan("");
  ColumnRanks ranks = RankColumn({3.0, nan, std::nullopt, 3.0, 3.1, 3.2}, false, 3);
  EXPECT_EQ(ranks.best, (std::vector<size_t>{0, 3}));
  EXPECT_EQ(ranks.second, (std::vector<size_t>{4}));
  ranks = RankColumn({3.0001, 3.0004, 3.1}, false, 3);  // both print 3.000
  EXPECT_EQ(ranks.best, (std::vector<size_t>{0, 1}));
  EXPECT_EQ(ranks.second, (std::vector<size_t>{2}));
  ranks = RankColumn({41.5, 41.2, nan, 40.0}, true, 2);
  EXPECT_EQ(ranks.best, (std::vector<size_t>{0}));
  EXPECT_EQ(ranks.second, (std::vector<size_t>{1}));
  ranks = RankColumn({2.0, 2.0}, false, 3);
  EXPECT_EQ(ranks.best, (std::vector<size_t>{0, 1}));
  EXPECT_TRUE(ranks.second.empty()) << "no second when every value ties";
  ranks = RankColumn({std::nullopt, nan}, false, 3);
  EXPECT_TRUE(ranks.best.empty());
  EXPECT_TRUE(ranks.second.empty());
}

}  // namespace
}  // namespace spheret::client
