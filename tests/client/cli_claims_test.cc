// `spheret report --claims` against a real coordinator whose database fake workers filled with a
// small study in the shape of `make claims-cpu` (methods, ScaleNorm on and off for GeoNorm and
// p-SpheretNorm, the angle cap at π/4, π/2 and none; 3 seeds; a diverged Pre-LN seed and two
// diverged uncapped seeds; two sweeps repeat two configs): the report is written in every
// format, and every figure and verdict of its JSON is recomputed from the SQLite file with SciPy
// (claims_scipy_check.py, which must also catch a figure and a verdict changed by 1e-6 and by
// hand; skipped when the project's Python has no SciPy).
#include "tests/client/cli_fixture.h"

namespace spheret {
namespace {

constexpr char kMethods[] = R"(name: claims-methods
dataset: fortunes
metric: {name: val/loss, goal: minimize}
base: {max_iters: 100, eval_interval: 10}
parameters:
  method: {values: [pre_ln, keel, geonorm, p_spheret]}
  p: {values: [2], only_for: {method: p_spheret}}
seeds: [1, 2, 3]
resources: {gpus: 0}
)";

constexpr char kScaleNorm[] = R"(name: claims-scalenorm
dataset: fortunes
metric: {name: val/loss, goal: minimize}
base: {max_iters: 100, eval_interval: 10}
parameters:
  method: {values: [geonorm, p_spheret]}
  p: {values: [2], only_for: {method: p_spheret}}
  scalenorm: {values: [false, true]}
seeds: [1, 2, 3]
resources: {gpus: 0}
)";

constexpr char kCap[] = R"(name: claims-cap
dataset: fortunes
metric: {name: val/loss, goal: minimize}
base: {max_iters: 100, eval_interval: 10}
parameters:
  method: {values: [p_spheret]}
  p: {values: [4]}
  angle_max: {values: [0.7853981633974483, 1.5707963267948966, none]}
seeds: [1, 2, 3]
resources: {gpus: 0}
)";

class CliClaimsTest : public CliTest {
 protected:
  // The fake study's outcome of a config: the final val loss by row, how fast the curve falls
  // (ScaleNorm fast), the loss spikes and which seeds diverge.
  struct Outcome {
    double final_loss;
    double tau;
    double spikes;
    bool diverged;
  };

  static Outcome OutcomeOf(const json& config) {
    const std::string method = config.value("method", "pre_ln");
    const int64_t seed = config.value("seed", int64_t{1337});
    const bool scalenorm = config.value("scalenorm", method == "p_spheret");
    const bool uncapped = config.contains("angle_max") && config["angle_max"].is_string();
    const double angle = config.contains("angle_max") && config["angle_max"].is_number()
                             ? config["angle_max"].get<double>()
                             : 0.0;
    std::map<std::string, double> base = {
        {"pre_ln", 3.30}, {"keel", 3.36}, {"geonorm", 3.22}, {"p_spheret", 3.12}};
    double loss = base[method] + 0.013 * seed + 0.004 * (seed * seed % 3);
    if (method == "geonorm" && scalenorm) loss += 0.2;
    if (angle > 1) loss += 0.03 + 0.01 * seed;
    Outcome outcome{loss, scalenorm ? 8.0 + seed : 25.0 + 3 * seed, 0, false};
    if (uncapped) outcome = {3.6 + 0.02 * seed, 20, 2.0 + seed, seed != 1};
    if (method == "pre_ln" && seed == 3) outcome.diverged = true;
    return outcome;
  }

  // val/loss every 10 steps falling from 5 to the final loss (a diverged run stops at step 50
  // with a loss of 1e3), train/loss_spikes at the end.
  void ReportStudy(const v1::Lease& lease) {
    const Outcome outcome = OutcomeOf(json::parse(lease.config_json()));
    v1::IngestEventsResponse response;
    std::unique_ptr<grpc::ClientContext> context = Context();
    auto writer = workers_->IngestEvents(context.get(), &response);
    v1::EventBatch batch;
    batch.set_trial_id(lease.trial_id());
    batch.set_attempt(lease.attempt());
    const auto add = [&](const std::string& name, int step, double value) {
      v1::MetricRow* row = batch.add_metrics();
      row->set_name(name);
      row->set_step(step);
      row->set_value(value);
    };
    const int last = outcome.diverged ? 50 : 100;
    for (int step = 0; step <= last; step += 10) {
      const double fall = std::exp(-step / outcome.tau);
      add("val/loss", step, outcome.final_loss + (5.0 - outcome.final_loss) * fall);
    }
    if (outcome.diverged) add("train/loss", last, 1e3);
    add("train/loss_spikes", last, outcome.spikes);
    ASSERT_TRUE(writer->Write(batch));
    writer->WritesDone();
    ASSERT_TRUE(writer->Finish().ok());
  }

  int64_t RunSweep(const std::string& text, const std::string& name, int trials) {
    const fs::path file = *dir_ / (name + ".yaml");
    std::ofstream(file) << text;
    CliResult submitted = Cli({"submit", file.string()});
    EXPECT_EQ(submitted.exit_code, 0) << submitted.err;
    int64_t sweep_id = 0;
    EXPECT_EQ(std::sscanf(submitted.out.c_str(), "sweep %ld:", &sweep_id), 1) << submitted.out;
    std::vector<v1::Lease> leases = Acquire("fake-claims", trials);
    EXPECT_EQ(static_cast<int>(leases.size()), trials);
    for (const v1::Lease& lease : leases) {
      ReportStudy(lease);
      const bool diverged = OutcomeOf(json::parse(lease.config_json())).diverged;
      Finish("fake-claims", lease, diverged ? v1::TRIAL_STATE_DIVERGED : v1::TRIAL_STATE_SUCCEEDED,
             "", diverged ? 3 : 0);
    }
    return sweep_id;
  }

  // `report --claims --out`: every file written, every claim tested; the records of claims.json.
  void WriteClaims(const fs::path& out, json* records) {
    CliResult written = Cli({"report", "claims-*", "--claims", "--out", out.string()});
    ASSERT_EQ(written.exit_code, 0) << written.err;
    EXPECT_NE(written.out.find("wrote claims.{txt,md,csv,json}: "), std::string::npos)
        << written.out;
    for (const char* extension : {".txt", ".md", ".csv", ".json"}) {
      EXPECT_TRUE(fs::exists(out / (std::string("claims") + extension))) << extension;
    }
    *records = json::parse(ReadFile(out / "claims.json"));
    std::set<std::string> claims;
    for (const json& record : *records) {
      claims.insert(record["claim"].get<std::string>());
      if (record["claim"] == "scalenorm_accelerates") {
        EXPECT_EQ(record["confounds"], "") << record.dump();  // matched on method
      }
    }
    for (const char* id : {"spheretnorm_vs_pre_ln", "spheretnorm_vs_baselines",
                           "spheretnorm_vs_geonorm_matched", "best_at_finite_p", "cap_divergences",
                           "cap_loss_spikes", "cap_final_loss", "cap_quarter_vs_half_pi",
                           "scalenorm_accelerates", "converges_where_pre_ln_or_keel_diverge"}) {
      EXPECT_EQ(claims.count(id), 1u) << id << " is not tested:\n" << ReadFile(out / "claims.md");
    }
  }

  // Markdown says the divergences and the confounds; LaTeX is refused in one line.
  void ExpectClaimsFormats() {
    CliResult md = Cli({"report", "claims-methods", "--claims", "--format", "md"});
    ASSERT_EQ(md.exit_code, 0) << md.err;
    EXPECT_NE(md.out.find("1 of 3 diverged"), std::string::npos) << md.out;
    EXPECT_NE(md.out.find("rows also differ in scalenorm"), std::string::npos) << md.out;
    CliResult latex = Cli({"report", "claims-methods", "--claims", "--format", "latex"});
    EXPECT_NE(latex.exit_code, 0);
    EXPECT_NE(latex.err.find("--claims --format: table, md, csv or json"), std::string::npos);
  }

  // The SciPy check finds a nudged interval and a flipped verdict.
  void ExpectTheCheckCatchesTampering(const json& records) {
    json tampered = records;
    tampered[0]["ci95_low"] = tampered[0]["ci95_low"].get<double>() + 1e-6;
    tampered[1]["verdict"] = tampered[1]["verdict"] == "supported" ? "inconclusive" : "supported";
    std::ofstream(*dir_ / "tampered.json") << tampered.dump();
    CliResult caught =
        Run({SPHERET_TEST_PYTHON, SPHERET_CLAIMS_CHECK, *db_, (*dir_ / "tampered.json").string()});
    EXPECT_EQ(caught.exit_code, 1) << caught.out;
    EXPECT_NE(caught.out.find("ci95_low"), std::string::npos) << caught.out;
    EXPECT_NE(caught.out.find("by the rule"), std::string::npos) << caught.out;
    EXPECT_NE(caught.out.find("2 mismatch(es)"), std::string::npos) << caught.out;
  }
};

TEST_F(CliClaimsTest, ReportClaimsEqualsScipyOnTheDatabase) {
  RunSweep(kMethods, "claims-methods", 12);
  RunSweep(kScaleNorm, "claims-scalenorm", 12);
  RunSweep(kCap, "claims-cap", 9);
  const fs::path out = *dir_ / "claims";
  json records;
  WriteClaims(out, &records);
  if (HasFatalFailure()) return;
  ExpectClaimsFormats();

  CliResult check =
      Run({SPHERET_TEST_PYTHON, SPHERET_CLAIMS_CHECK, *db_, (out / "claims.json").string()});
  if (check.exit_code == 77) GTEST_SKIP() << check.out;
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  EXPECT_NE(check.out.find("every figure equals SciPy's to 1e-9 and every verdict follows the "
                           "rule"),
            std::string::npos)
      << check.out;
  ExpectTheCheckCatchesTampering(records);
}

}  // namespace
}  // namespace spheret
