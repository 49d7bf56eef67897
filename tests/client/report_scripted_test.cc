// Trials of a researcher's TorchScript connection (`method: scripted`, `connection: FILE`) in the
// reports: each connection file is a row of its own, labelled `scripted:STEM` (RowMethodOf), in
// the results, the claims' rows and the paper tables' left-out notes; the connection's keys are
// its identity, never a confound; sphere-only geometry prints n/a for it.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "client/report/claims.h"
#include "client/report/claims_rows.h"
#include "client/report/geometry.h"
#include "client/report/paper_layout.h"
#include "client/report/results.h"
#include "client/report/results_format.h"

namespace spheret::client {
namespace {

using nlohmann::json;

TrialResult Trial(int64_t id, const std::string& method, const std::string& connection, int seed,
                  double val_loss) {
  json config = {{"method", method}, {"scale", "xs"}, {"seed", seed}, {"dataset", "fortunes"}};
  if (!connection.empty()) {
    config["connection"] = connection;
    // The same file, however the sweep wrote its path, has the same digest (64 hex digits).
    config["connection_sha256"] =
        std::string(64, connection.find("gated") != std::string::npos ? 'a' : 'b');
  }
  return {id, TrialState::kSucceeded, TrialConfig(config.dump()), {{"val/loss", val_loss}}};
}

std::vector<TrialResult> Trials() {
  return {Trial(1, "pre_ln", "", 1, 3.0), Trial(2, "scripted", "rezero.pt", 1, 2.9),
          Trial(3, "scripted", "examples/connections/rezero.pt", 2, 2.7),
          Trial(4, "scripted", "gated.pt", 1, 2.8), Trial(5, "geonorm", "", 1, 2.6)};
}

std::vector<std::string> Labels(const ResultTable& table) {
  std::vector<std::string> labels;
  for (const ResultRowKey& row : table.rows) labels.push_back(row.label);
  return labels;
}

TEST(ScriptedRows, EachConnectionFileIsItsOwnRowAfterTheBuiltInMethods) {
  const ResultTable table = AggregateResults(Trials(), {"val/loss"});
  EXPECT_EQ(Labels(table), (std::vector<std::string>{"pre_ln", "geonorm", "scripted:gated@aaaaaaaa",
                                                     "scripted:rezero@bbbbbbbb"}));
  const Aggregate& rezero = table.cells.at("scripted:rezero@bbbbbbbb").at("xs").at("val/loss");
  EXPECT_EQ(rezero.n, 2) << "rezero.pt as two sweeps wrote it: one row, two seeds";
  EXPECT_NEAR(rezero.mean, 2.8, 1e-12);
  EXPECT_TRUE(table.confounds.empty())
      << "the connection's keys are the row's identity: "
      << (table.confounds.empty() ? "" : ConfoundSentence(table.confounds.front()));
  const std::vector<std::string>& keys = ConnectionIdentityKeys();
  EXPECT_TRUE(std::all_of(keys.begin(), keys.end(),
                          [&](const std::string& k) { return table.identity_keys.count(k); }));
}

TEST(ScriptedRows, SphereOnlyGeometryPrintsNotApplicableForScriptedOnly) {
  std::vector<TrialResult> trials = {Trial(1, "pre_ln", "", 1, 3.0),
                                     Trial(2, "scripted", "rezero.pt", 1, 2.9)};
  for (TrialResult& trial : trials) trial.values["geometry/theta_mean"] = 0.25;
  const ResultTable table =
      AggregateResults(trials, {"geometry/theta_mean", "geometry/alpha_mean"});
  const Table text = ResultsTableFor(table, Format::kTable, ResultFormatOptions{});
  ASSERT_EQ(text.rows.size(), 2u);
  EXPECT_EQ(text.rows[0][0], "pre_ln");
  EXPECT_EQ(text.rows[0][2], "—") << "pre_ln's tables print as before";
  EXPECT_EQ(text.rows[1][0], "scripted:rezero@bbbbbbbb");
  EXPECT_EQ(text.rows[1][2], "n/a") << "alpha is sphere-only";
  EXPECT_NE(text.rows[1][1], "n/a") << "theta is generic";
  EXPECT_EQ(DiagFieldOf("geometry/gate_dyt_percent"), "gate_choice");
}

TEST(ScriptedRows, ClaimRowsAreLabelledByConnection) {
  std::vector<ClaimTrial> trials;
  for (const TrialResult& result : Trials()) trials.push_back({result, "sweep", {}, {}});
  const claim_rows::Rows rows = claim_rows::BuildRows(trials);
  std::vector<std::string> labels;
  for (const claim_rows::Row& row : rows.rows) labels.push_back(row.label);
  EXPECT_NE(std::find(labels.begin(), labels.end(), "scripted:gated@aaaaaaaa"), labels.end());
  EXPECT_TRUE(std::any_of(labels.begin(), labels.end(), [](const std::string& label) {
    return label.rfind("scripted:rezero@bbbbbbbb", 0) == 0;
  }));
}

TEST(ScriptedRows, PaperTablesLeaveThemOutByTheirRowName) {
  std::vector<PaperTrial> trials;
  for (const TrialResult& result : Trials()) trials.push_back({result, "FineWeb-Edu"});
  absl::StatusOr<PaperTableData> data = BuildPaperTable(PaperOutput::kTable2, trials, {});
  ASSERT_TRUE(data.ok()) << data.status();
  const auto said = [&](const std::string& text) {
    return std::any_of(data->left_out.begin(), data->left_out.end(),
                       [&](const std::string& line) { return line.find(text) != line.npos; });
  };
  EXPECT_TRUE(said("trial 4 (scripted:gated@aaaaaaaa): not a row of the paper's tables"));
  EXPECT_TRUE(said("trial 2 (scripted:rezero@bbbbbbbb)"));
}

}  // namespace
}  // namespace spheret::client
