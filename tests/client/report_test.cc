// Aggregation over seeds, the paper's layouts and the table renderings, checked against values
// computed here.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "client/report/results.h"
#include "client/report/results_format.h"
#include "client/report/table.h"

namespace spheret::client {
namespace {

TrialResult Trial(int64_t id, const std::string& method, double p, const std::string& scale,
                  int seed, double val_loss, const std::string& state = "SUCCEEDED") {
  nlohmann::json config = {{"method", method},
                           {"scale", scale},
                           {"seed", seed},
                           {"dataset", "fortunes"},
                           {"max_iters", 100}};
  if (p > 0) config["p"] = p;
  return {id, *ParseTrialState(state), TrialConfig(config.dump()), {{"val/loss", val_loss}}};
}

TEST(Summarize, MeanAndSampleStandardDeviation) {
  const Aggregate a = Summarize({2.0, 4.0, 6.0});
  EXPECT_DOUBLE_EQ(a.mean, 4.0);
  EXPECT_DOUBLE_EQ(a.std, 2.0);  // sqrt(((-2)^2 + 0 + 2^2) / (3 - 1))
  EXPECT_EQ(a.n, 3);
  EXPECT_TRUE(std::isnan(Summarize({1.5}).std));
  EXPECT_EQ(Summarize({}).n, 0);
}

TEST(AggregateResults, PivotsByMethodAndScaleInThePapersOrder) {
  const std::vector<TrialResult> trials = {
      Trial(1, "p_spheret", 2, "M", 1, 3.0),        Trial(2, "p_spheret", 0.5, "S", 1, 3.2),
      Trial(3, "pre_ln", 0, "S", 1, 3.1),           Trial(4, "pre_ln", 0, "S", 2, 3.3),
      Trial(5, "geonorm", 0, "xs", 1, 2.5),         Trial(6, "pre_ln", 0, "S", 3, 9.9, "FAILED"),
      Trial(7, "pre_ln", 0, "S", 4, 9.9, "RUNNING")};
  const ResultTable table = AggregateResults(trials, {"val/loss"});
  std::vector<std::string> labels;
  for (const ResultRowKey& row : table.rows) labels.push_back(row.label);
  EXPECT_EQ(labels,
            (std::vector<std::string>{"pre_ln", "geonorm", "p_spheret p=0.5", "p_spheret p=2"}));
  EXPECT_EQ(table.scales, (std::vector<std::string>{"xs", "S", "M"}));
  const Aggregate& pre_ln = table.cells.at("pre_ln").at("S").at("val/loss");
  EXPECT_NEAR(pre_ln.mean, 3.2, 1e-12);
  EXPECT_NEAR(pre_ln.std, std::sqrt(0.02), 1e-12);
  EXPECT_EQ(pre_ln.n, 2);  // FAILED and RUNNING left out
  EXPECT_EQ(table.left_out.at("FAILED"), 1);
  EXPECT_EQ(table.left_out.at("RUNNING"), 1);
  EXPECT_EQ(table.dataset, "fortunes");
}

TEST(AggregateResults, KnobsThatVaryBecomePartOfTheRow) {
  TrialResult a = Trial(1, "pre_ln", 0, "xs", 1, 3.0);
  TrialResult b = Trial(2, "pre_ln", 0, "xs", 1, 2.0);
  nlohmann::json config = b.config.object();
  config["learning_rate"] = 0.001;
  b.config = TrialConfig(config.dump());
  const ResultTable table = AggregateResults({a, b}, {"val/loss"});
  ASSERT_EQ(table.rows.size(), 2u);
  EXPECT_EQ(table.rows[0].label, "pre_ln");
  EXPECT_EQ(table.rows[1].label, "pre_ln learning_rate=0.001");
}

TEST(PaperNumbers, FindsPublishedValuesUnderOurNames) {
  const PaperNumbers& paper = PaperNumbers::Embedded();
  EXPECT_EQ(paper.Datasets(), (std::vector<std::string>{"FineWeb-Edu", "OpenWebText"}));
  EXPECT_DOUBLE_EQ(*paper.Find("FineWeb-Edu", "S", "pre_ln", std::nullopt, "val/loss"), 3.071);
  EXPECT_DOUBLE_EQ(*paper.Find("FineWeb-Edu", "S", "pre_ln", std::nullopt, "train/loss_avg"),
                   3.057);
  // Proj-SpheretNorm is p_spheret at p = 1.
  EXPECT_EQ(paper.Find("FineWeb-Edu", "M", "proj_spheret", std::nullopt, "val/loss"),
            paper.Find("FineWeb-Edu", "M", "p_spheret", 1.0, "val/loss"));
  EXPECT_TRUE(paper.Find("FineWeb-Edu", "M", "p_spheret", 1.0, "val/loss").has_value());
  EXPECT_FALSE(paper.Find("FineWeb-Edu", "xs", "pre_ln", std::nullopt, "val/loss").has_value());
  const PaperNumbers parsed = PaperNumbers::Parse(
      "dataset,scale,method,p,metric,value\nD,L,p_spheret,0.50,hellaswag/acc_norm,41.5\n");
  EXPECT_DOUBLE_EQ(*parsed.Find("D", "L", "p_spheret", 0.5, "hellaswag/acc_norm"), 41.5);
  EXPECT_DOUBLE_EQ(*parsed.Find("D", "L", "p_spheret", 0.5, "zeroshot/hellaswag/acc_norm"), 41.5)
      << "a stored score's name finds the paper's";
}

TEST(ResultFormat, PivotCellsAndLongRows) {
  const ResultTable table =
      AggregateResults({Trial(1, "pre_ln", 0, "S", 1, 3.1), Trial(2, "pre_ln", 0, "S", 2, 3.3),
                        Trial(3, "keel", 0, "S", 1, 7.6)},
                       {"val/loss"});
  ResultFormatOptions options;
  const Table pivot = PivotTable(table, options);
  EXPECT_EQ(pivot.header, (std::vector<std::string>{"method", "S"}));
  // 3.2 ± t(0.975, 1) · 0.1414 / √2 = 3.2 ± 12.7062 · 0.1.
  EXPECT_EQ(pivot.rows[0],
            (std::vector<std::string>{"pre_ln", "3.200 ± 0.141 [1.929, 4.471] (2)"}));
  EXPECT_EQ(pivot.rows[1], (std::vector<std::string>{"keel", "7.600 (1)"}));
  options.paper = &PaperNumbers::Embedded();
  const Table with_paper = PivotTable(table, options);
  EXPECT_EQ(with_paper.rows[0],
            (std::vector<std::string>{"pre_ln", "3.200 ± 0.141 [1.929, 4.471] (2)", "3.071"}));
  const Table long_rows = LongTable(table, options);
  ASSERT_EQ(long_rows.rows.size(), 2u);
  EXPECT_EQ(long_rows.rows[0][5], "3.2000000000000002");
  EXPECT_EQ(long_rows.header[8], "ci95_low");
  EXPECT_NEAR(std::stod(long_rows.rows[0][8]), 3.2 - 12.706204736174707 * 0.1, 1e-12);
  EXPECT_NEAR(std::stod(long_rows.rows[0][9]), 3.2 + 12.706204736174707 * 0.1, 1e-12);
  EXPECT_EQ(long_rows.rows[1][6], "");  // std of one seed
  EXPECT_EQ(long_rows.rows[1][8], "");  // nor an interval
}

TEST(Render, CsvQuotesJsonTypesLatexEscapes) {
  Table table;
  table.header = {"name", "value"};
  table.numeric = {false, true};
  table.rows = {{"a,b \"q\"", "1.5"}, {"p_spheret 50%", ""}};
  EXPECT_EQ(RenderCsv(table), "name,value\n\"a,b \"\"q\"\"\",1.5\np_spheret 50%,\n");
  const nlohmann::json parsed = nlohmann::json::parse(RenderJson(table));
  EXPECT_DOUBLE_EQ(parsed[0]["value"].get<double>(), 1.5);
  EXPECT_TRUE(parsed[1]["value"].is_null());
  const std::string latex = RenderLatex(table);
  EXPECT_NE(latex.find("\\begin{tabular}{lr}"), std::string::npos);
  EXPECT_NE(latex.find("p\\_spheret 50\\%"), std::string::npos) << latex;
  // The first column is as wide as its longest cell (13) plus two spaces.
  EXPECT_EQ(RenderText(table), "name           value\na,b \"q\"        1.5\np_spheret 50%\n");
  EXPECT_FALSE(ParseFormat("xml").ok());
  EXPECT_EQ(*ParseFormat("md"), Format::kMarkdown);
}

// Issue 44, item 13: 1e308 was printed with "%.4f" into 64 bytes: 63 digits of a 309-digit
// number, a wrong value. From 1e15 on a number is written with its 15 significant digits.
TEST(Render, HugeNumbersAreShortAndKeepTheirDigits) {
  EXPECT_EQ(FormatNumber(1e308, 4), "1e+308");
  EXPECT_EQ(FormatNumber(-1.7976931348623157e308, 4), "-1.79769313486232e+308");
  EXPECT_EQ(FormatNumber(123456789012345678.0, 2), "1.23456789012346e+17");
  EXPECT_EQ(FormatNumber(1e15, 0), "1e+15");
  EXPECT_EQ(FormatNumber(999999999999999.0, 1), "999999999999999.0");
  EXPECT_EQ(FormatNumber(3.14159, 3), "3.142");
  EXPECT_EQ(FormatNumber(-2.5e-7, 4), "-0.0000");
  EXPECT_EQ(FormatNumber(std::numeric_limits<double>::infinity(), 4), "inf");
  EXPECT_EQ(FormatNumber(std::nan(""), 4), "");
  EXPECT_EQ(FormatNumber(1.5, 1000), "1." + std::string(30, '0').replace(0, 1, "5"));
}

// Names and values others chose reach no terminal as escape sequences, in any format; JSON keeps
// them exact (as \u escapes).
TEST(Render, EveryFormatEscapesTerminalSequences) {
  Table table;
  table.header = {"task", "zeroshot/hella\x1b[2Jswag/acc"};
  table.numeric = {false, true};
  table.rows = {{"a\x1b]0;owned\x07\rb\xc2\x9b", "1.5"}};
  for (Format format :
       {Format::kTable, Format::kCsv, Format::kJson, Format::kMarkdown, Format::kLatex}) {
    const std::string out = Render(table, format);
    for (char control : {'\x1b', '\x07', '\r'}) {
      EXPECT_EQ(out.find(control), std::string::npos) << FormatExtension(format) << ": " << out;
    }
    EXPECT_EQ(out.find("\xc2\x9b"), std::string::npos) << FormatExtension(format) << ": " << out;
  }
  EXPECT_NE(RenderText(table).find("a\\x1b]0;owned\\x07\\rb\\u009b"), std::string::npos);
  EXPECT_NE(RenderText(table).find("zeroshot/hella\\x1b[2Jswag/acc"), std::string::npos);
  const nlohmann::json parsed = nlohmann::json::parse(RenderJson(table));
  EXPECT_EQ(parsed[0]["task"], table.rows[0][0]);
}

}  // namespace
}  // namespace spheret::client
