// The paper's tables as data (client/report/paper_tables.h): adding a column to Table 2 from a
// metric of the catalog is one line of its declaration. This test build adds that line to a copy
// of Table 2's declaration and finds the new column in every format `spheret report --paper`
// writes (txt, md, tex from PaperTableText; csv, json from PaperTableLong) and its metric in the
// fetch list derived from the declarations; the paper's own declarations are left as they were.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "client/report/paper_layout.h"
#include "client/report/paper_tables.h"
#include "client/report/table.h"
#include "protocol/metric_catalog.h"

namespace spheret::client {
namespace {

using nlohmann::json;

// Pre-LN and GeoNorm at FineWeb-Edu S over two seeds, with losses and loss spikes.
std::vector<PaperTrial> Trials() {
  std::vector<PaperTrial> trials;
  int64_t id = 0;
  for (const char* method : {"pre_ln", "geonorm"}) {
    for (int64_t seed : {1337, 1338}) {
      const json config = {
          {"method", method}, {"scale", "S"}, {"seed", seed}, {"dataset", "fineweb_edu"}};
      TrialResult trial{++id, TrialState::kSucceeded, TrialConfig(config.dump()), {}};
      const double spikes = std::string(method) == "pre_ln" ? 4 + seed - 1337 : 1;
      trial.values = {{protocol::kTrainLossAvg, 3.0},
                      {protocol::kValLoss, 3.1},
                      {protocol::kTrainLossSpikes, spikes}};
      trials.push_back({trial, CorpusOf(trial.config, "table2")});
    }
  }
  return trials;
}

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(PaperDeclarations, OneLineAddsAColumnToTable2InEveryOutputFormat) {
  PaperOutputSpec table2 = PaperOutputSpecOf(PaperOutput::kTable2);
  table2.columns.push_back({protocol::kTrainLossSpikes, "spikes"});  // the one line
  absl::StatusOr<PaperTableData> data = BuildPaperTable(table2, Trials(), {});
  ASSERT_TRUE(data.ok()) << data.status();
  ASSERT_EQ(data->header.size(), 1u + 2 * 3 * 3) << "3 columns under each corpus and scale";
  EXPECT_EQ(data->header[3], "FineWeb-Edu S spikes ↓");
  const Table text = PaperTableText(*data, {});
  const Table long_rows = PaperTableLong(*data);
  const std::string txt = Render(text, Format::kTable);
  const std::string md = Render(text, Format::kMarkdown);
  const std::string tex = Render(text, Format::kLatex);
  const std::string csv = Render(long_rows, Format::kCsv);
  const std::string json_text = Render(long_rows, Format::kJson);
  // Pre-LN's spikes are 4 and 5 (mean 4.5), GeoNorm's 1 and 1: the lower is marked best.
  EXPECT_TRUE(Has(txt, "FineWeb-Edu S spikes ↓")) << txt;
  EXPECT_TRUE(Has(txt, "4.500 ± 0.707")) << txt;
  EXPECT_TRUE(Has(txt, "1.000 ± 0.000 [1.000, 1.000] (2) *")) << txt;
  EXPECT_TRUE(Has(md, "| FineWeb-Edu S spikes ↓ |")) << md;
  EXPECT_TRUE(Has(md, "**1.000 ± 0.000 [1.000, 1.000] (2)**")) << md;
  EXPECT_TRUE(Has(tex, "spikes $\\downarrow$")) << tex;
  EXPECT_TRUE(Has(tex, "4.500 $\\pm$ 0.707")) << tex;
  EXPECT_TRUE(Has(csv, "Pre-LN,FineWeb-Edu,S,train/loss_spikes,2,4.5,")) << csv;
  const json records = json::parse(json_text);
  int spikes = 0;
  for (const json& record : records) {
    if (record["metric"] != protocol::kTrainLossSpikes) continue;
    ++spikes;
    if (record["row"] == "GeoNorm" && record["corpus"] == "FineWeb-Edu" && record["scale"] == "S") {
      EXPECT_EQ(record["mean"], 1.0);
    }
  }
  EXPECT_EQ(spikes, 8 * 2 * 3) << "a record per row, corpus and scale";
  // The fetch list follows the declarations: with the line, and without it as shipped.
  const std::vector<std::string> fetched = PaperFetchMetrics({table2});
  EXPECT_EQ(fetched, (std::vector<std::string>{protocol::kTrainLossAvg, protocol::kValLoss,
                                               protocol::kTrainLossSpikes}));
  EXPECT_EQ(PaperFetchMetrics(), (std::vector<std::string>{protocol::kTrainLossAvg,
                                                           protocol::kValLoss, protocol::kValPpl}));
  EXPECT_EQ(PaperOutputSpecOf(PaperOutput::kTable2).columns.size(), 2u);
}

TEST(PaperDeclarations, LabelsAndDirectionsComeFromTheCatalog) {
  const PaperOutputSpec& table2 = PaperOutputSpecOf(PaperOutput::kTable2);
  EXPECT_EQ(PaperWhat(table2.columns[0]), "train loss");
  EXPECT_EQ(PaperWhat(table2.columns[1]), "val loss");
  EXPECT_EQ(PaperWhat(PaperOutputSpecOf(PaperOutput::kTable3).columns[0]), "val ppl");
  EXPECT_EQ(PaperDirection({protocol::kGradNorm, "grad"}), protocol::Direction::kNone);
  EXPECT_EQ(DirectionArrow(PaperDirection({"zeroshot/boolq/acc", "BoolQ acc"})), "↑");
  EXPECT_EQ(PaperMetricName(protocol::kValPpl), "val_ppl");
  EXPECT_EQ(PaperMetricName("zeroshot/boolq/acc"), "boolq/acc");
  EXPECT_EQ(*ParsePaperOutput("figure3"), PaperOutput::kFigure3);
  EXPECT_EQ(ParsePaperOutput("table9").status().message(),
            "--paper: 'table9' is not one of table2, table3, table4, table5, figure2, figure3");
}

}  // namespace
}  // namespace spheret::client
