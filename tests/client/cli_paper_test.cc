// `spheret report --paper` against a real coordinator whose database fake workers filled: the
// paper's Table 2 equals the SQLite rows cell by cell, "–" stands where no trial is, the LaTeX
// compiles (where pdflatex is installed), and `--paper all` writes every output the sweeps hold.
#include "tests/client/cli_fixture.h"

namespace spheret {
namespace {

TEST_F(CliTest, ReportPaperPrintsTable2FromTheDatabase) {
  const int64_t sweep = CompletedSweep();  // pre_ln and p_spheret p=0.5 at S and M on fortunes
  CliResult csv = Cli({"report", std::to_string(sweep), "--paper", "table2", "--format", "csv"});
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  const auto rows = ParseCsv(csv.out);
  // 8 rows x (FineWeb-Edu, OpenWebText, fortunes) x (S, M, L) x (train, val).
  ASSERT_EQ(rows.size(), 8u * 3 * 3 * 2) << csv.out;
  int filled = 0;
  for (const std::string metric : {"val/loss", "train/loss_avg"}) {
    const auto cells = CellsFromDatabase(metric);
    for (const auto& row : rows) {
      if (row.at("metric") != metric) continue;
      const bool ours = row.at("corpus") == "fortunes" && row.at("scale") != "L" &&
                        (row.at("row") == "Pre-LN" || row.at("row") == "p-SpheretNorm (p=0.5)");
      if (!ours) {
        EXPECT_EQ(row.at("n"), "0") << row.at("row") << " " << row.at("corpus");
        EXPECT_EQ(row.at("mean"), "") << "a missing cell is never 0";
        EXPECT_FALSE(row.at("missing").empty());
        continue;
      }
      const std::string method = row.at("row") == "Pre-LN" ? "pre_ln" : "p_spheret";
      const auto& cell = cells.at(method + "|" + row.at("scale"));
      EXPECT_EQ(row.at("n"), "2");
      EXPECT_NEAR(std::stod(row.at("mean")), cell.first, 1e-12) << metric;
      EXPECT_NEAR(std::stod(row.at("std")), cell.second, 1e-12) << metric;
      ++filled;
    }
  }
  EXPECT_EQ(filled, 8);
}

TEST_F(CliTest, ReportPaperMarksMissingCellsCompilesAndWritesEveryOutput) {
  const int64_t sweep = CompletedSweep();
  CliResult md = Cli({"report", std::to_string(sweep), "--paper", "table2", "--format", "md"});
  ASSERT_EQ(md.exit_code, 0) << md.err;
  EXPECT_EQ(md.out.rfind("| method | FineWeb-Edu S train ↓ | FineWeb-Edu S val ↓ |", 0), 0u)
      << md.out;
  EXPECT_NE(md.out.find("| Pre-DyT | – | – |"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("– FineWeb-Edu: no trial in the given sweeps"), std::string::npos);
  EXPECT_NE(md.out.find("– fortunes L: no trial in the given sweeps"), std::string::npos);
  CliResult latex =
      Cli({"report", std::to_string(sweep), "--paper", "table2", "--format", "latex"});
  ASSERT_EQ(latex.exit_code, 0) << latex.err;
  EXPECT_NE(latex.out.find("\\multicolumn{6}{c}{fortunes}"), std::string::npos) << latex.out;
  ExpectLatexCompiles(latex.out, "paper_table2");

  const fs::path out = *dir_ / "paper";
  CliResult all = Cli({"report", std::to_string(sweep), "--paper", "all", "--out", out.string()});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  for (const char* table : {"table2", "table3", "table4", "table5"}) {
    for (const char* extension : {".txt", ".md", ".tex", ".csv", ".json"}) {
      EXPECT_TRUE(fs::exists(out / (std::string(table) + extension))) << table << extension;
    }
  }
  ExpectLatexCompiles(ReadFile(out / "table4.tex"), "paper_table4");
  EXPECT_NE(all.out.find("skipped figure2: no trial of FineWeb-Edu in the given sweeps has a "
                         "train/loss_avg curve"),
            std::string::npos)
      << all.out;

  CliResult bad = Cli({"report", std::to_string(sweep), "--paper", "table9"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--paper: 'table9' is not one of table2"), std::string::npos) << bad.err;
  CliResult figure = Cli({"report", std::to_string(sweep), "--paper", "figure2"});
  EXPECT_NE(figure.exit_code, 0);
  EXPECT_NE(figure.err.find("give --out DIR"), std::string::npos) << figure.err;
}

}  // namespace
}  // namespace spheret
