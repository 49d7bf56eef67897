// Issue 44, item 11: a sampled axis's range must be one draws can cover (a uniform range wider
// than DBL_MAX drew max every time), and draws that coincide are said, not merged without a word.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/sweep/sweep_expand.h"
#include "server/sweep/sweep_search.h"
#include "server/sweep/sweep_spec.h"

namespace spheret {
namespace {

// A search over 2 methods with one sampled axis, `axis` (its key and range, YAML flow).
std::string Search(const std::string& axis, int samples = 3) {
  return "name: s\ndataset: d\nbase: {max_iters: 100, eval_interval: 10}\nparameters:\n"
         "  method: {values: [pre_ln, geonorm]}\n  " +
         axis + "\nsearch: {strategy: random, samples: " + std::to_string(samples) + "}\n";
}

std::string ParseError(const std::string& yaml) {
  absl::StatusOr<SweepSpec> spec = ParseSweepSpec(yaml);
  return spec.ok() ? "" : std::string(spec.status().message());
}

TEST(SweepBounds, AUniformRangeWiderThanDblMaxIsRefusedNamingTheBound) {
  EXPECT_EQ(ParseError(Search("dropout: {distribution: uniform, min: -1e308, max: 1e308}")),
            "line 6: parameters.dropout.max: max - min of -1e+308 .. 1e+308 is wider than the "
            "largest double (1.797e308), so every draw would be max; narrow the range");
  EXPECT_EQ(ParseError(Search("learning_rate: {distribution: uniform, min: -1.7e308, max: 1e308}"))
                .rfind("line 6: parameters.learning_rate.max: max - min of", 0),
            0u);
  // Wide but finite: accepted (the trainer's ranges judge each drawn value).
  EXPECT_EQ(ParseError(Search("dropout: {distribution: uniform, min: -1e307, max: 1e308}")), "");
}

TEST(SweepBounds, LogUniformAndIntUniformBoundsAreChecked) {
  EXPECT_EQ(ParseError(Search("learning_rate: {distribution: loguniform, min: 0.0, max: 1e-2}")),
            "line 6: parameters.learning_rate.min: loguniform needs min above 0");
  // The whole positive double range is a finite width in log space (ln 1.8e308 - ln 4.9e-324).
  EXPECT_EQ(
      ParseError(Search("learning_rate: {distribution: loguniform, min: 4.9e-324, max: 1e308}")),
      "");
  EXPECT_EQ(ParseError(Search("warmup_iters: {distribution: int_uniform, min: 0, max: "
                              "9223372036854775807}")),
            "line 6: parameters.warmup_iters.max: int_uniform draws integers in "
            "[-9007199254740992, 9007199254740992] (2^53, exact in a double); got 0 .. "
            "9.22337e+18");
  EXPECT_EQ(ParseError(Search("warmup_iters: {distribution: int_uniform, min: 0, max: "
                              "9007199254740992}")),
            "");
  EXPECT_EQ(sweep_search::kMaxSampledInteger, int64_t{9007199254740992});
}

// The second half: 3 samples over 2 methods whose draws all coincide gave 2 trials where 6
// were asked for, silently. Now ExpandSweep says so.
TEST(SweepBounds, DrawsThatCoincideAreNamedInANotice) {
  absl::StatusOr<SweepSpec> spec =
      ParseSweepSpec(Search("dropout: {distribution: uniform, min: 0.1, max: 0.100001}"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  std::vector<std::string> notices;
  absl::StatusOr<std::vector<TrialSpec>> trials = ExpandSweep(*spec, {}, nullptr, &notices);
  ASSERT_TRUE(trials.ok()) << trials.status();
  EXPECT_EQ(trials->size(), 2u) << "every draw rounds to 0.1 (4 significant digits)";
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_EQ(notices[0],
            "search.samples: 3 draws per grid point gave fewer distinct trials at 2 grid point(s) "
            "(e.g. {\"method\":\"pre_ln\"}: 1 of 3), so the sweep has 4 trial(s) fewer than grid "
            "points x samples x seeds (equal draws are one trial); draws coincide where a range "
            "holds few distinct values at 4 significant digits, or int_uniform or choice has few "
            "values");
  // Distinct draws: no notice.
  spec = ParseSweepSpec(Search("dropout: {distribution: uniform, min: 0.0, max: 0.5}"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  notices.clear();
  trials = ExpandSweep(*spec, {}, nullptr, &notices);
  ASSERT_TRUE(trials.ok()) << trials.status();
  EXPECT_EQ(trials->size(), 6u);
  EXPECT_TRUE(notices.empty()) << notices[0];
}

TEST(SweepBounds, APointNoSampledAxisReachesIsNamedToo) {
  absl::StatusOr<SweepSpec> spec = ParseSweepSpec(
      "name: s\ndataset: d\nbase: {max_iters: 100, eval_interval: 10}\nparameters:\n"
      "  method: {values: [pre_ln, p_spheret]}\n"
      "  p: {distribution: loguniform, min: 0.5, max: 4.0, only_for: {method: p_spheret}}\n"
      "search: {strategy: random, samples: 4}\nseeds: [1, 2]\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  std::vector<std::string> notices;
  absl::StatusOr<std::vector<TrialSpec>> trials = ExpandSweep(*spec, {}, nullptr, &notices);
  ASSERT_TRUE(trials.ok()) << trials.status();
  EXPECT_EQ(trials->size(), (1u + 4u) * 2u);
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_NE(notices[0].find("at 1 grid point(s) (e.g. {\"method\":\"pre_ln\"}: 1 of 4), so the "
                            "sweep has 6 trial(s) fewer"),
            std::string::npos)
      << notices[0];
  EXPECT_NE(notices[0].find("; 1 of these grid points have no sampled axis (only_for)"),
            std::string::npos)
      << notices[0];
}

// The integers of a sweep file's own keys have their ranges (docs/security.md's limits table).
TEST(SweepBounds, TopLevelIntegersHaveTheirRanges) {
  const std::string head = "name: s\ndataset: d\nparameters: {method: {values: [pre_ln]}}\n";
  EXPECT_EQ(ParseError(head + "max_restarts: 101\n"),
            "line 4: max_restarts: must be an integer in [0, 100], got 101");
  EXPECT_EQ(ParseError(head + "max_restarts: 100\n"), "");
  EXPECT_EQ(ParseError(head + "priority: 1001\n"),
            "line 4: priority: must be an integer in [0, 1000], got 1001");
  EXPECT_EQ(ParseError(head + "resources: {nodes: 65}\n"),
            "line 4: resources.nodes: must be an integer in [1, 64], got 65");
  EXPECT_EQ(ParseError(Search("dropout: {distribution: uniform, min: 0.0, max: 0.5}", 100'001)),
            "line 7: search.samples: must be an integer in [1, 100000], got 100001");
  EXPECT_EQ(ParseError("name: " + std::string(129, 'a') +
                       "\ndataset: d\nparameters: "
                       "{method: {values: [pre_ln]}}\n"),
            "line 1: name: use letters, digits, '.', '_' and '-' (at most 128)");
}

}  // namespace
}  // namespace spheret
