// The paper's claims as tests (client/report/claims.h): Fisher's exact test against SciPy's
// values, every branch of the verdict rule, the pairing of rows per claim (paper settings with
// the scalenorm confound listed, matched rows, the best finite p, repeats across sweeps), and the
// records the SciPy check reads.
#include "client/report/claims.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "client/report/fisher.h"

namespace spheret::client {
namespace {

using nlohmann::json;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A trial of `config` (method, p, ... as a sweep writes them) with a final val loss, a val/loss
// curve falling from 5 to `val` at step `reach` and staying there to step 100, and its loss
// spikes.
ClaimTrial Trial(int64_t id, json config, double val, const std::string& state = "SUCCEEDED",
                 int64_t reach = 40, double spikes = 0, const std::string& sweep = "s") {
  config["dataset"] = "fortunes";
  config["scale"] = "xs";
  ClaimTrial trial;
  trial.result.trial_id = id;
  trial.result.state = *ParseTrialState(state);
  trial.result.config = TrialConfig(config.dump());
  trial.sweep = sweep;
  if (state == "SUCCEEDED") {
    trial.result.values["val/loss"] = val;
    trial.result.values["train/loss_spikes"] = spikes;
    trial.val_steps = {0, reach, 100};
    trial.val_losses = {5.0, val, val};
  }
  return trial;
}

json Config(const std::string& method, int64_t seed, json extra = json::object()) {
  json config = {{"method", method}, {"seed", seed}};
  for (auto it = extra.begin(); it != extra.end(); ++it) config[it.key()] = it.value();
  return config;
}

const Claim& ClaimById(const std::string& id) {
  for (const Claim& claim : PaperClaims()) {
    if (claim.id == id) return claim;
  }
  ADD_FAILURE() << "no claim " << id;
  return PaperClaims().front();
}

std::vector<const ClaimComparison*> Of(const std::vector<ClaimComparison>& all,
                                       const std::string& id) {
  std::vector<const ClaimComparison*> mine;
  for (const ClaimComparison& c : all) {
    if (c.claim->id == id) mine.push_back(&c);
  }
  return mine;
}

TEST(FisherExact, EqualsScipy) {
  // scipy.stats.fisher_exact([[a, a_total - a], [b, b_total - b]]).pvalue
  EXPECT_NEAR(FisherExactTwoSided(0, 3, 3, 3), 0.10000000000000002, 1e-12);
  EXPECT_NEAR(FisherExactTwoSided(0, 4, 4, 4), 0.028571428571428567, 1e-12);
  EXPECT_NEAR(FisherExactTwoSided(1, 10, 11, 14), 0.0027594561852200836, 1e-12);
  EXPECT_NEAR(FisherExactTwoSided(2, 7, 0, 6), 0.4615384615384615, 1e-12);
  EXPECT_EQ(FisherExactTwoSided(3, 3, 3, 3), 1.0);
  EXPECT_NEAR(FisherExactTwoSided(0, 3, 1, 3), 1.0, 1e-12);
  EXPECT_EQ(FisherExactTwoSided(0, 0, 1, 3), 1.0);
}

ClaimComparison MeanCase(const std::string& claim, double low, double high) {
  ClaimComparison c;
  c.claim = &ClaimById(claim);
  c.a_values = {3.1, 3.2, 3.3};
  c.b_values = {3.2, 3.3, 3.4};
  c.difference.ci_low = low;
  c.difference.ci_high = high;
  return c;
}

TEST(Verdict, MeansFollowTheIntervalsSide) {
  ClaimComparison c = MeanCase("spheretnorm_vs_pre_ln", -0.3, -0.1);  // A lower, as stated
  Decide(&c);
  EXPECT_EQ(c.verdict, Verdict::kSupported) << c.reason;
  c = MeanCase("spheretnorm_vs_pre_ln", 0.1, 0.3);
  Decide(&c);
  EXPECT_EQ(c.verdict, Verdict::kContradicted) << c.reason;
  c = MeanCase("spheretnorm_vs_pre_ln", -0.1, 0.2);
  Decide(&c);
  EXPECT_EQ(c.verdict, Verdict::kInconclusive);
  EXPECT_EQ(c.reason, "the 95% interval of A − B includes 0");
  c = MeanCase("spheretnorm_vs_pre_ln", kNaN, kNaN);
  c.b_values = {3.3};
  Decide(&c);
  EXPECT_EQ(c.verdict, Verdict::kInconclusive);
  EXPECT_EQ(c.reason, "fewer than 2 counted seeds in a row");
  c = MeanCase("spheretnorm_vs_pre_ln", -200, -200);  // steps on a coarse grid: all equal
  c.difference.mean = -200;
  Decide(&c);
  EXPECT_EQ(c.verdict, Verdict::kInconclusive);
  EXPECT_EQ(c.reason,
            "the differences have no spread (-200.0000): a t interval of no width is "
            "no evidence");
  c = MeanCase("spheretnorm_vs_pre_ln", kNaN, kNaN);  // Welch, no spread in either row
  Decide(&c);
  EXPECT_EQ(c.verdict, Verdict::kInconclusive);
  c = MeanCase("spheretnorm_vs_pre_ln", -0.3, -0.1);
  c.disallowed = {"weight_decay"};
  Decide(&c);
  EXPECT_EQ(c.verdict, Verdict::kInconclusive);
  EXPECT_EQ(c.reason, "confounded by weight_decay (the 95% interval of A − B lies below 0)");
}

ClaimComparison CountCase(const std::string& claim, int a, int n_a, int b, int n_b) {
  ClaimComparison c;
  c.claim = &ClaimById(claim);
  c.a_values.assign(n_a, 0);
  c.b_values.assign(n_b, 0);
  for (int i = 0; i < a; ++i) c.a_values[i] = 1;
  for (int i = 0; i < b; ++i) c.b_values[i] = 1;
  c.diverged_a = a;
  c.diverged_b = b;
  c.mean_a = static_cast<double>(a) / n_a;
  c.mean_b = static_cast<double>(b) / n_b;
  c.fisher_p = FisherExactTwoSided(a, n_a, b, n_b);
  return c;
}

TEST(Verdict, DivergenceCountsNeedFishersP) {
  ClaimComparison c = CountCase("cap_divergences", 0, 4, 4, 4);  // p = 0.029, capped fewer
  Decide(&c);
  EXPECT_EQ(c.verdict, Verdict::kSupported) << c.reason;
  c = CountCase("cap_divergences", 4, 4, 0, 4);
  Decide(&c);
  EXPECT_EQ(c.verdict, Verdict::kContradicted) << c.reason;
  c = CountCase("cap_divergences", 0, 3, 3, 3);  // p = 0.1: too few seeds to tell
  Decide(&c);
  EXPECT_EQ(c.verdict, Verdict::kInconclusive);
  EXPECT_EQ(c.reason, "Fisher's p = 0.1 ≥ 0.05");
}

TEST(Verdict, EverySettingNeedsTheConditionAndFallsToOneCounterexample) {
  const std::string id = "converges_where_pre_ln_or_keel_diverge";
  ClaimComparison c = CountCase(id, 0, 3, 0, 3);
  Decide(&c);
  EXPECT_EQ(c.verdict, Verdict::kInconclusive);
  EXPECT_EQ(c.reason, "not tested here: B did not diverge");
  c = CountCase(id, 1, 4, 4, 4);
  Decide(&c);
  EXPECT_EQ(c.verdict, Verdict::kContradicted);
  c = CountCase(id, 0, 4, 4, 4);
  Decide(&c);
  EXPECT_EQ(c.verdict, Verdict::kSupported) << c.reason;
  c = CountCase(id, 0, 3, 1, 3);
  Decide(&c);
  EXPECT_EQ(c.verdict, Verdict::kInconclusive);
  EXPECT_NE(c.reason.find("at this n"), std::string::npos) << c.reason;
}

// Pre-LN, p-SpheretNorm p = 1 with ScaleNorm on and off, GeoNorm with ScaleNorm off and on, and
// p = 4 capped and uncapped, 3 seeds each; one Pre-LN seed diverged.
std::vector<ClaimTrial> Study() {
  std::vector<ClaimTrial> trials;
  int64_t id = 1;
  for (int64_t seed : {1, 2, 3}) {
    const double noise = 0.01 * seed;
    trials.push_back(
        Trial(id++, Config("pre_ln", seed), 3.30 + noise, seed == 3 ? "DIVERGED" : "SUCCEEDED"));
    trials.push_back(
        Trial(id++, Config("p_spheret", seed, {{"p", 1}}), 3.10 + noise * 1.5, "SUCCEEDED", 20));
    trials.push_back(Trial(id++, Config("p_spheret", seed, {{"p", 1}, {"scalenorm", false}}),
                           3.20 + noise, "SUCCEEDED", 60 + 10 * seed));
    trials.push_back(Trial(id++, Config("geonorm", seed), 3.15 - noise));
    trials.push_back(Trial(id++, Config("geonorm", seed, {{"scalenorm", true}}), 3.40 + noise));
    trials.push_back(Trial(id++, Config("p_spheret", seed, {{"p", 4}}), 3.12 + noise));
    trials.push_back(Trial(id++, Config("p_spheret", seed, {{"p", 4}, {"angle_max", "none"}}), 3.6,
                           seed == 1 ? "SUCCEEDED" : "DIVERGED", 40, 2.0 + seed));
  }
  return trials;
}

TEST(EvaluateClaims, PaperSettingsListTheScaleNormConfoundWithoutForcingTheVerdict) {
  const std::vector<ClaimComparison> all = EvaluateClaims(Study());
  const auto pre_ln = Of(all, "spheretnorm_vs_pre_ln");
  ASSERT_EQ(pre_ln.size(), 2u);  // p = 1 and p = 4 at the paper's settings, against Pre-LN
  const ClaimComparison& c = *pre_ln[0];
  EXPECT_EQ(c.column, "xs");
  EXPECT_EQ(c.b_row, "pre_ln");
  EXPECT_EQ(c.a_values.size(), 3u);
  EXPECT_EQ(c.b_values.size(), 2u);
  EXPECT_EQ(c.test, "Welch t") << "A has seeds 1-3, B 1-2: not the same seeds";
  ASSERT_EQ(c.left_out.size(), 1u);
  EXPECT_NE(c.left_out[0].find("trial 15 DIVERGED"), std::string::npos) << c.left_out[0];
  ASSERT_EQ(c.confounds.size(), 1u);
  EXPECT_EQ(c.confounds[0].key, "scalenorm");
  EXPECT_TRUE(c.disallowed.empty());
  EXPECT_EQ(c.verdict, Verdict::kSupported) << c.reason;
}

TEST(EvaluateClaims, EachClaimPairsItsRows) {
  const std::vector<ClaimComparison> all = EvaluateClaims(Study());
  EXPECT_EQ(Of(all, "spheretnorm_vs_baselines").size(), 2u);  // GeoNorm with ScaleNorm off only
  const auto matched = Of(all, "spheretnorm_vs_geonorm_matched");
  ASSERT_EQ(matched.size(), 3u);  // p = 1 on/off and p = 4 capped against GeoNorm alike
  for (const ClaimComparison* c : matched) {
    EXPECT_TRUE(c->confounds.empty()) << c->a_row << " vs " << c->b_row;
  }
  const auto best = Of(all, "best_at_finite_p");
  ASSERT_EQ(best.size(), 1u);
  EXPECT_EQ(best[0]->a_row, "p_spheret p=1 scalenorm=on");  // 3.13 beats p = 4's 3.14
  EXPECT_EQ(best[0]->b_row, "geonorm scalenorm=off");
  EXPECT_TRUE(Of(all, "cap_quarter_vs_half_pi").empty());  // no π/2 row
}

TEST(EvaluateClaims, CapClaimsCountDivergencesAndLeaveThemOutOfMeans) {
  const std::vector<ClaimComparison> all = EvaluateClaims(Study());
  const auto divergences = Of(all, "cap_divergences");
  ASSERT_EQ(divergences.size(), 1u);
  const ClaimComparison& d = *divergences[0];
  EXPECT_EQ(d.a_row, "p_spheret p=4 angle_max=0.785398");
  EXPECT_EQ(d.b_row, "p_spheret p=4 angle_max=none");
  EXPECT_EQ(d.diverged_a, 0);
  EXPECT_EQ(d.diverged_b, 2);
  EXPECT_NEAR(d.fisher_p, 0.4, 1e-12);  // scipy.stats.fisher_exact([[0, 3], [2, 1]])
  EXPECT_EQ(d.verdict, Verdict::kInconclusive);
  const auto spikes = Of(all, "cap_loss_spikes");
  ASSERT_EQ(spikes.size(), 1u);
  EXPECT_EQ(spikes[0]->b_values, std::vector<double>{3.0});
  EXPECT_EQ(spikes[0]->left_out.size(), 2u);
  EXPECT_EQ(spikes[0]->test, "needs 2 seeds each");
  EXPECT_EQ(spikes[0]->reason, "fewer than 2 counted seeds in a row");
}

TEST(EvaluateClaims, ScaleNormIsComparedWithinAMethodByStepsToALoss) {
  const std::vector<ClaimComparison> all = EvaluateClaims(Study());
  const auto scalenorm = Of(all, "scalenorm_accelerates");
  ASSERT_EQ(scalenorm.size(), 2u);
  const ClaimComparison& p1 = *scalenorm[1];  // GeoNorm first in the paper's order
  EXPECT_EQ(p1.a_row, "p_spheret p=1 scalenorm=on");
  EXPECT_EQ(p1.b_row, "p_spheret p=1 scalenorm=off");
  EXPECT_TRUE(p1.confounds.empty());
  EXPECT_NEAR(p1.threshold, 3.23, 1e-12);  // the largest final loss of both rows
  EXPECT_EQ(p1.a_values, (std::vector<double>{20, 20, 20}));
  EXPECT_EQ(p1.b_values, (std::vector<double>{70, 80, 90}));
  EXPECT_EQ(p1.test, "paired t");
  EXPECT_NEAR(p1.difference.mean, -60, 1e-12);
  EXPECT_EQ(p1.verdict, Verdict::kSupported) << p1.reason;
  EXPECT_EQ(scalenorm[0]->verdict, Verdict::kInconclusive);  // GeoNorm: equal steps
}

TEST(EvaluateClaims, CapClaimsSkipMethodsTheCapDoesNotActOn) {
  std::vector<ClaimTrial> trials;
  for (int64_t seed : {1, 2}) {
    for (const std::string method : {"pre_ln", "proj_spheret", "cay_spheret"}) {
      for (const json& angle : {json(0.7853981633974483), json("none")}) {
        trials.push_back(Trial(static_cast<int64_t>(trials.size()) + 1,
                               Config(method, seed, {{"angle_max", angle}}), 3.0 + 0.1 * seed));
      }
    }
  }
  const std::vector<ClaimComparison> all = EvaluateClaims(trials);
  const auto final_loss = Of(all, "cap_final_loss");
  ASSERT_EQ(final_loss.size(), 1u);  // Pre-LN and Proj-SpheretNorm never read angle_max
  EXPECT_EQ(final_loss[0]->a_row, "cay_spheret angle_max=0.785398");
  EXPECT_EQ(final_loss[0]->b_row, "cay_spheret angle_max=none");
}

TEST(EvaluateClaims, EverySettingIsTestedWherePreLnDiverged) {
  const std::vector<ClaimComparison> all = EvaluateClaims(Study());
  const auto converges = Of(all, "converges_where_pre_ln_or_keel_diverge");
  ASSERT_EQ(converges.size(), 2u);
  EXPECT_EQ(converges[0]->diverged_b, 1);
  EXPECT_EQ(converges[0]->b_values.size(), 3u);
  EXPECT_EQ(converges[0]->verdict, Verdict::kInconclusive);
  EXPECT_NE(converges[0]->reason.find("≥ 0.05 at this n"), std::string::npos);
}

TEST(EvaluateClaims, AnUnknownKnobBetweenRowsMakesItInconclusive) {
  std::vector<ClaimTrial> trials;
  for (int64_t seed : {1, 2, 3}) {
    trials.push_back(Trial(seed, Config("pre_ln", seed, {{"weight_decay", 0.05}}), 3.3 + seed));
    trials.push_back(Trial(10 + seed, Config("p_spheret", seed, {{"p", 0.5}}), 2.0 + seed * 1.01));
  }
  const auto all = EvaluateClaims(trials);
  const auto pre_ln = Of(all, "spheretnorm_vs_pre_ln");
  ASSERT_EQ(pre_ln.size(), 1u);
  EXPECT_EQ(pre_ln[0]->disallowed, std::vector<std::string>{"weight_decay"});
  EXPECT_EQ(pre_ln[0]->verdict, Verdict::kInconclusive);
  EXPECT_EQ(pre_ln[0]->reason.rfind("confounded by weight_decay", 0), 0u) << pre_ln[0]->reason;
}

TEST(EvaluateClaims, RepeatsInTwoSweepsStayTwoRows) {
  std::vector<ClaimTrial> trials;
  for (const std::string sweep : {"one", "two"}) {
    for (int64_t seed : {1, 2}) {
      trials.push_back(Trial(static_cast<int64_t>(trials.size()) + 1, Config("pre_ln", seed),
                             3.3 + 0.01 * seed, "SUCCEEDED", 40, 0, sweep));
    }
  }
  for (int64_t seed : {1, 2}) {
    trials.push_back(Trial(10 + seed, Config("proj_spheret", seed), 3.1 + 0.02 * seed));
  }
  const std::vector<ClaimComparison> all = EvaluateClaims(trials);
  const auto pre_ln = Of(all, "spheretnorm_vs_pre_ln");
  ASSERT_EQ(pre_ln.size(), 2u);
  EXPECT_EQ(pre_ln[0]->b_row, "pre_ln [one]");
  EXPECT_EQ(pre_ln[1]->b_row, "pre_ln [two]");
  EXPECT_EQ(pre_ln[0]->test, "paired t");
}

TEST(RenderClaims, RecordsCarryEveryFigureAndTextNamesTheRule) {
  const std::vector<ClaimComparison> all = EvaluateClaims(Study());
  const json records = json::parse(RenderClaims(all, Format::kJson));
  ASSERT_EQ(records.size(), all.size());
  const json& first = records[0];
  EXPECT_EQ(first["claim"], "spheretnorm_vs_pre_ln");
  EXPECT_EQ(first["trials_a"], "2 9 16");
  EXPECT_EQ(first["trials_b"], "1 8");
  EXPECT_EQ(first["test"], "Welch t");
  EXPECT_EQ(first["verdict"], "supported");
  EXPECT_NE(first["confounds"].get<std::string>().find("scalenorm: on (p_spheret p=1"),
            std::string::npos)
      << first["confounds"];
  EXPECT_DOUBLE_EQ(first["effect"].get<double>(), all[0].difference.mean);
  const std::string md = RenderClaims(all, Format::kMarkdown);
  EXPECT_NE(md.find("## spheretnorm_vs_pre_ln (Tables 2–3)"), std::string::npos) << md;
  EXPECT_NE(md.find("## The verdict rule"), std::string::npos);
  EXPECT_NE(md.find("rows also differ in scalenorm"), std::string::npos);
  EXPECT_NE(md.find("left out pre_ln: trial 15 DIVERGED"), std::string::npos) << md;
  EXPECT_NE(RenderClaims({}, Format::kTable).find("No claim of the paper can be tested"),
            std::string::npos);
  EXPECT_EQ(*ParseFormat("txt"), Format::kTable);  // the text file's extension names it too
}

}  // namespace
}  // namespace spheret::client
