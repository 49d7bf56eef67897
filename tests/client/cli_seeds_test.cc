// `spheret results` and `spheret report --paper` against a real coordinator where one seed of
// three DIVERGED: the step comes from the trainer's stored `diverged` event, and every format
// shows the cell as 2 of 3 with the reason (before, a clean mean over 2 with no word of the third).
// The sweep's default configs pair ScaleNorm with the method (off for pre_ln and geonorm, on for
// proj_spheret): every output that puts the rows side by side prints that confound.
#include "tests/client/cli_fixture.h"

namespace spheret {
namespace {

constexpr char kDivergedSweep[] = R"(name: cli-diverged
dataset: fortunes
metric: {name: val/loss, goal: minimize}
base: {max_iters: 200, eval_interval: 50}
parameters:
  method: {values: [pre_ln, geonorm, proj_spheret]}
  scale: {values: [S]}
seeds: [1, 2, 3]
resources: {gpus: 0}
)";

class CliSeedsTest : public CliTest {
 protected:
  // A trainer that logs train/loss to step 139, then diverges at 140.
  void ReportDiverged(const v1::Lease& lease) {
    v1::IngestEventsResponse response;
    std::unique_ptr<grpc::ClientContext> context = Context();
    auto writer = workers_->IngestEvents(context.get(), &response);
    v1::EventBatch batch;
    batch.set_trial_id(lease.trial_id());
    batch.set_attempt(lease.attempt());
    for (int step = 0; step < 140; ++step) {
      v1::MetricRow* row = batch.add_metrics();
      row->set_name("train/loss_avg");
      row->set_step(step);
      row->set_value(5.0);
    }
    v1::Event* event = batch.add_other();
    event->set_json(R"({"type":"diverged","step":140,"loss":null,"bound":10})");
    event->set_seq(1);
    ASSERT_TRUE(writer->Write(batch));
    writer->WritesDone();
    ASSERT_TRUE(writer->Finish().ok());
  }

  // Submits the sweep and runs it, once per suite: geonorm's seed 3 diverges, every other trial
  // succeeds. Returns the sweep id and (in `diverged`) the diverged trial's id.
  int64_t DivergedSweep(int64_t* diverged) {
    static int64_t sweep_id = 0, diverged_id = 0;
    *diverged = diverged_id;
    if (sweep_id != 0) return sweep_id;
    const fs::path file = *dir_ / "diverged.yaml";
    std::ofstream(file) << kDivergedSweep;
    CliResult submitted = Cli({"submit", file.string()});
    EXPECT_EQ(submitted.exit_code, 0) << submitted.err;
    EXPECT_EQ(std::sscanf(submitted.out.c_str(), "sweep %ld:", &sweep_id), 1) << submitted.out;
    std::vector<v1::Lease> leases = Acquire("fake-seeds", 9);
    EXPECT_EQ(leases.size(), 9u);
    for (const v1::Lease& lease : leases) {
      const json config = json::parse(lease.config_json());
      if (config["method"] == "geonorm" && config["seed"] == 3) {
        ReportDiverged(lease);
        Finish("fake-seeds", lease, v1::TRIAL_STATE_DIVERGED, "loss diverged", 3);
        *diverged = diverged_id = lease.trial_id();
        continue;
      }
      Report(lease, 200);
      Finish("fake-seeds", lease, v1::TRIAL_STATE_SUCCEEDED);
    }
    return sweep_id;
  }
};

TEST_F(CliSeedsTest, TextFormatsShowTheDivergedSeedAndTheConfound) {
  int64_t diverged = 0;
  const std::string sweep = std::to_string(DivergedSweep(&diverged));
  const std::string seed = "seed 3 (trial " + std::to_string(diverged) + ") diverged at step 140";
  for (const char* format : {"table", "md", "latex"}) {
    CliResult results = Cli({"results", sweep, "--format", format});
    ASSERT_EQ(results.exit_code, 0) << results.err;
    EXPECT_NE(results.out.find("(2 of 3; 1 diverged at step 140)"), std::string::npos)
        << format << "\n"
        << results.out;
    EXPECT_NE(results.out.find(seed), std::string::npos) << format << "\n" << results.out;
    const bool latex = std::string(format) == "latex";
    EXPECT_NE(results.out.find(latex ? "Confound: rows also differ in scalenorm: off for pre\\_ln, "
                                       "geonorm; on for proj\\_spheret"
                                     : "Confound: rows also differ in scalenorm: off for pre_ln, "
                                       "geonorm; on for proj_spheret"),
              std::string::npos)
        << format << "\n"
        << results.out;
    CliResult paper = Cli({"report", sweep, "--paper", "table2", "--format", format});
    ASSERT_EQ(paper.exit_code, 0) << paper.err;
    EXPECT_NE(paper.out.find("(2 of 3; 1 diverged at step 140)"), std::string::npos)
        << format << "\n"
        << paper.out;
    EXPECT_NE(paper.out.find("GeoNorm at fortunes S: 2 of 3 seeds counted; " + seed),
              std::string::npos)
        << format << "\n"
        << paper.out;
    EXPECT_NE(paper.out.find("Confound: rows also differ in scalenorm: off for Pre-LN, GeoNorm; "
                             "on for p-SpheretNorm (p=1)"),
              std::string::npos)
        << format << "\n"
        << paper.out;
  }
}

TEST_F(CliSeedsTest, CsvJsonBaselineAndStabilityShowTheDivergedSeedAndTheConfound) {
  int64_t diverged = 0;
  const std::string sweep = std::to_string(DivergedSweep(&diverged));
  const std::string seed = "seed 3 (trial " + std::to_string(diverged) + ") diverged at step 140";
  CliResult csv = Cli({"results", sweep, "--format", "csv"});
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  for (const auto& row : ParseCsv(csv.out)) {
    const bool geonorm = row.at("method") == "geonorm";
    EXPECT_EQ(row.at("n"), geonorm ? "2" : "3");
    EXPECT_EQ(row.at("n_total"), "3");
    EXPECT_EQ(row.at("left_out"), geonorm ? seed : "");
    EXPECT_EQ(row.at("confounds"), "scalenorm: off (pre_ln, geonorm); on (proj_spheret)");
  }
  CliResult paper_json = Cli({"report", sweep, "--paper", "table3", "--format", "json"});
  ASSERT_EQ(paper_json.exit_code, 0) << paper_json.err;
  int seen = 0;
  for (const json& row : json::parse(paper_json.out)) {
    if (row["row"] != "GeoNorm" || row["corpus"] != "fortunes" || row["scale"] != "S") continue;
    EXPECT_EQ(row["n"], 2);
    EXPECT_EQ(row["n_total"], 3);
    EXPECT_EQ(row["left_out"], seed);
    EXPECT_EQ(row["confounds"], "scalenorm: off (Pre-LN, GeoNorm); on (p-SpheretNorm (p=1))");
    ++seen;
  }
  EXPECT_EQ(seen, 1);
  CliResult baseline = Cli({"results", sweep, "--baseline", "pre_ln", "--format", "json"});
  ASSERT_EQ(baseline.exit_code, 0) << baseline.err;
  const json compared = json::parse(baseline.out);
  ASSERT_EQ(compared.size(), 2u) << baseline.out;  // geonorm, proj_spheret against pre_ln
  EXPECT_EQ(compared[0]["left_out"], seed) << baseline.out;
  EXPECT_EQ(compared[0]["confounds"], "");
  EXPECT_EQ(compared[1]["confounds"], "scalenorm: off (pre_ln); on (proj_spheret)");
  const fs::path out = *dir_ / "seeds-report";
  CliResult report = Cli({"report", sweep, "--out", out.string()});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  EXPECT_NE(ReadFile(out / "stability.md").find("| geonorm | S | 1 of 3 (at step 140) |"),
            std::string::npos)
      << ReadFile(out / "stability.md");
  EXPECT_NE(ReadFile(out / "README.md").find(", geonorm at S: diverged at step 140"),
            std::string::npos);
}

}  // namespace
}  // namespace spheret
