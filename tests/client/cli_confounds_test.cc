// Confounds end to end: a sweep file whose `with:` sets a knob per method (weight_decay, a knob
// the report code has never heard of) prints it as a confound in `results`, `--baseline` and
// `report --paper`; the same sweep without it, whose rows differ only in the method, prints none.
#include "tests/client/cli_fixture.h"

namespace spheret {
namespace {

std::string SweepFile(const std::string& name, const std::string& with) {
  return "name: " + name +
         "\ndataset: fortunes\nmetric: {name: val/loss, goal: minimize}\n"
         "base: {max_iters: 100, eval_interval: 50}\nparameters:\n"
         "  method: {values: [pre_ln, keel]" +
         with + "}\n  scale: {values: [S]}\nseeds: [1, 2]\nresources: {gpus: 0}\n";
}

class CliConfoundsTest : public CliTest {
 protected:
  // Submits `yaml` and runs its trials to SUCCEEDED with a fake worker; returns the sweep id.
  std::string RunSweep(const std::string& yaml) {
    const fs::path file = *dir_ / "confounds.yaml";
    std::ofstream(file) << yaml;
    CliResult submitted = Cli({"submit", file.string()});
    EXPECT_EQ(submitted.exit_code, 0) << submitted.err;
    int64_t sweep_id = 0;
    EXPECT_EQ(std::sscanf(submitted.out.c_str(), "sweep %ld:", &sweep_id), 1) << submitted.out;
    for (const v1::Lease& lease : Acquire("fake-confounds", 4)) {
      Report(lease, 100);
      Finish("fake-confounds", lease, v1::TRIAL_STATE_SUCCEEDED);
    }
    return std::to_string(sweep_id);
  }
};

TEST_F(CliConfoundsTest, AKnobSetPerMethodByWithIsAConfoundEverywhere) {
  const std::string sweep = RunSweep(SweepFile("cli-with", ", with: {weight_decay: [0.1, 0.05]}"));
  CliResult results = Cli({"results", sweep});
  ASSERT_EQ(results.exit_code, 0) << results.err;
  EXPECT_NE(results.out.find("Confound: rows also differ in weight_decay: 0.1 for pre_ln; 0.05 "
                             "for keel\n"),
            std::string::npos)
      << results.out;
  CliResult baseline = Cli({"results", sweep, "--baseline", "pre_ln", "--format", "json"});
  ASSERT_EQ(baseline.exit_code, 0) << baseline.err;
  EXPECT_EQ(json::parse(baseline.out)[0]["confounds"], "weight_decay: 0.1 (pre_ln); 0.05 (keel)")
      << baseline.out;
  CliResult paper = Cli({"report", sweep, "--paper", "table2", "--format", "json"});
  ASSERT_EQ(paper.exit_code, 0) << paper.err;
  int ours = 0;
  for (const json& row : json::parse(paper.out)) {
    if (row["corpus"] != "fortunes" || row["scale"] != "S") continue;
    EXPECT_EQ(row["confounds"], "weight_decay: 0.1 (Pre-LN); 0.05 (Keel)") << row.dump();
    ++ours;
  }
  EXPECT_EQ(ours, 8 * 2) << "8 rows x (train, val)";
}

TEST_F(CliConfoundsTest, ASweepWhereOnlyTheMethodDiffersPrintsNone) {
  const std::string sweep = RunSweep(SweepFile("cli-method-only", ""));
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"results", sweep, "--baseline", "pre_ln", "--format", "md"},
        std::vector<std::string>{"report", sweep, "--paper", "table2", "--format", "md"}}) {
    CliResult out = Cli(args);
    ASSERT_EQ(out.exit_code, 0) << out.err;
    EXPECT_EQ(out.out.find("Confound"), std::string::npos) << out.out;
  }
  CliResult csv = Cli({"results", sweep, "--format", "csv"});
  for (const auto& row : ParseCsv(csv.out)) EXPECT_EQ(row.at("confounds"), "");
}

}  // namespace
}  // namespace spheret
