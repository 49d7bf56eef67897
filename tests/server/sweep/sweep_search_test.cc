// The sweep language's searches: sampled axes, the search: block, and what they expand into.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "config/trial_config.h"
#include "server/sweep/sweep_expand.h"
#include "server/sweep/sweep_spec.h"

namespace spheret {
namespace {

constexpr char kTune[] = R"(name: tune
dataset: fortunes
base: {scale: xs, max_iters: 300, eval_interval: 30, warmup_iters: 30, lr_decay_iters: 300}
parameters:
  method: {values: [pre_ln, geonorm]}
  learning_rate: {distribution: loguniform, min: 1e-4, max: 3e-2}
  dropout: {distribution: uniform, min: 0.0, max: 0.2}
  n_head: {distribution: choice, values: [2, 4]}
search:
  strategy: asha
  samples: 5
  group_by: [method]
  min_iters: 30
  reduction_factor: 3
  confirm: {seeds: [1, 2], top: 1}
)";

std::vector<TrialSpec> Expand(const std::string& yaml) {
  absl::StatusOr<SweepSpec> spec = ParseSweepSpec(yaml);
  EXPECT_TRUE(spec.ok()) << spec.status();
  if (!spec.ok()) return {};
  absl::StatusOr<std::vector<TrialSpec>> trials = ExpandSweep(*spec);
  EXPECT_TRUE(trials.ok()) << trials.status();
  return trials.ok() ? *trials : std::vector<TrialSpec>{};
}

std::string ErrorOf(const std::string& yaml) {
  absl::StatusOr<SweepSpec> spec = ParseSweepSpec(yaml);
  if (!spec.ok()) return std::string(spec.status().message());
  absl::StatusOr<std::vector<TrialSpec>> trials = ExpandSweep(*spec);
  return trials.ok() ? "" : std::string(trials.status().message());
}

TEST(SweepSearchTest, ParsesTheSearchBlock) {
  absl::StatusOr<SweepSpec> spec = ParseSweepSpec(kTune);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->search.strategy, "asha");
  EXPECT_EQ(spec->search.metric, "val/loss");
  EXPECT_TRUE(spec->search.minimize);
  EXPECT_EQ(spec->search.min_iters, 30);
  EXPECT_EQ(spec->search.reduction_factor, 3);
  EXPECT_EQ(spec->search.confirm_seeds, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(spec->search.confirm_top, 1);
  EXPECT_EQ(spec->samples, 5);
  EXPECT_EQ(spec->group_by, (std::vector<std::string>{"method"}));
  EXPECT_EQ(spec->parameters[1].sampler.distribution, "loguniform");
}

TEST(SweepSearchTest, DrawsAreReproduciblePerGroupWithinBoundsAndRounded) {
  const std::vector<TrialSpec> first = Expand(kTune), second = Expand(kTune);
  ASSERT_EQ(first.size(), 10u) << "2 methods x 5 samples x 1 seed";
  std::map<std::string, std::set<double>> rates;
  for (size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(first[i].trial_key, second[i].trial_key) << "the same file draws the same trials";
    EXPECT_EQ(first[i].role, "search");
    const TrialConfig config(first[i].config_json);
    const double lr = config.Find("learning_rate")->get<double>();
    EXPECT_GE(lr, 1e-4);
    EXPECT_LE(lr, 3e-2);
    char text[32];
    std::snprintf(text, sizeof(text), "%.4g", lr);
    EXPECT_EQ(std::strtod(text, nullptr), lr) << "4 significant digits";
    const double dropout = config.Find("dropout")->get<double>();
    EXPECT_GE(dropout, 0.0);
    EXPECT_LE(dropout, 0.2);
    const int64_t heads = config.Find("n_head")->get<int64_t>();
    EXPECT_TRUE(heads == 2 || heads == 4);
    EXPECT_EQ(first[i].search_group, "{\"method\":\"" + config.KnobText("method") + "\"}");
    rates[first[i].search_group].insert(lr);
  }
  ASSERT_EQ(rates.size(), 2u);
  EXPECT_NE(*rates.begin()->second.begin(), *rates.rbegin()->second.begin())
      << "each group draws its own values";
  // Another seed draws other values; the groups and counts stay.
  std::string reseeded = kTune;
  reseeded += "  seed: 7\n";
  const std::vector<TrialSpec> other = Expand(reseeded);
  ASSERT_EQ(other.size(), first.size());
  EXPECT_NE(other[0].trial_key, first[0].trial_key);
}

TEST(SweepSearchTest, IntUniformCoversItsIntegersAndListedAxesStillCross) {
  const std::vector<TrialSpec> trials = Expand(R"(name: t
dataset: d
base: {max_iters: 100, eval_interval: 10}
parameters:
  scale: {values: [xs, s-cpu]}
  warmup_iters: {distribution: int_uniform, min: 1, max: 3}
search: {strategy: random, samples: 40}
seeds: [1, 2]
)");
  std::set<int64_t> seen;
  for (const TrialSpec& trial : trials) {
    seen.insert(TrialConfig(trial.config_json).Find("warmup_iters")->get<int64_t>());
  }
  EXPECT_EQ(seen, (std::set<int64_t>{1, 2, 3}));
  // 40 draws of 3 values repeat: each grid point keeps one trial per distinct draw, per seed.
  EXPECT_EQ(trials.size(), 2u * 3u * 2u);
}

TEST(SweepSearchTest, GridSearchMarksTrialsWithTheirGroup) {
  const std::vector<TrialSpec> trials = Expand(R"(name: t
dataset: d
base: {max_iters: 100, eval_interval: 10}
parameters:
  method: {values: [pre_ln, geonorm]}
  learning_rate: {values: [1e-3, 3e-3]}
search: {strategy: asha, min_iters: 10, group_by: [method]}
)");
  ASSERT_EQ(trials.size(), 4u);
  EXPECT_EQ(trials[0].search_group, R"({"method":"pre_ln"})");
  EXPECT_EQ(trials[3].search_group, R"({"method":"geonorm"})");
  const std::vector<TrialSpec> plain =
      Expand("name: t\ndataset: d\nparameters: {method: {values: [pre_ln]}}\n");
  EXPECT_EQ(plain[0].role, "");
  EXPECT_EQ(plain[0].search_group, "");
}

TEST(SweepSearchTest, MistakesAreNamedWithTheirLine) {
  const std::string head = "name: t\ndataset: d\nbase: {max_iters: 100, eval_interval: 10}\n";
  const std::pair<std::string, std::string> cases[] = {
      {"parameters: {learning_rate: {distribution: loguniform, min: 1e-4, max: 1e-2}}\n",
       "line 4: parameters.learning_rate: a sampled axis (distribution:) needs a search: block"},
      {"parameters: {learning_rate: {distribution: normal, min: 1, max: 2}}\n"
       "search: {strategy: random, samples: 2}\n",
       "must be loguniform, uniform, int_uniform or choice"},
      {"parameters: {learning_rate: {distribution: loguniform, min: 0.0, max: 1e-2}}\n"
       "search: {strategy: random, samples: 2}\n",
       "loguniform needs min above 0"},
      {"parameters: {learning_rate: {distribution: uniform, min: 1e-2, max: 1e-3}}\n"
       "search: {strategy: random, samples: 2}\n",
       "must be above min"},
      {"parameters: {n_layer: {distribution: uniform, min: 1, max: 4}}\n"
       "search: {strategy: random, samples: 2}\n",
       "use int_uniform"},
      {"parameters: {learning_rate: {distribution: loguniform, min: 1e-4, max: 1e-2}}\n"
       "search: {strategy: random}\n",
       "sampled axes need samples: N"},
      {"parameters: {method: {values: [pre_ln]}}\nsearch: {strategy: random, samples: 2}\n",
       "random draws sampled axes"},
      {"parameters: {method: {values: [pre_ln]}}\nsearch: {strategy: asha}\n",
       "strategy asha needs min_iters"},
      {"parameters: {method: {values: [pre_ln]}}\nsearch: {strategy: asha, min_iters: 15}\n",
       "config key 'eval_interval' (10) must divide search.min_iters (15)"},
      {"parameters: {method: {values: [pre_ln]}}\nsearch: {strategy: asha, min_iters: 100}\n",
       "config key 'max_iters' (100) must be above search.min_iters (100)"},
      {"parameters: {method: {values: [pre_ln]}}\nsearch: {strategy: grid, group_by: [p]}\n",
       "p is not a knob of this sweep"},
      {"parameters: {method: {values: [pre_ln]}}\n"
       "search: {strategy: grid, confirm: {seeds: [1, 1]}}\n",
       "lists 1 twice"},
      {"parameters: {method: {values: [pre_ln]}}\nsearch: {strategy: grid, min_iters: 10}\n",
       "applies to strategy asha only"},
      {"parameters: {method: {values: [pre_ln]}}\nsearch: {strategy: grid, eta: 3}\n",
       "unknown key; valid:"},
  };
  for (const auto& [tail, expected] : cases) {
    const std::string error = ErrorOf(head + tail);
    EXPECT_NE(error.find(expected), std::string::npos) << tail << "\n-> " << error;
  }
}

TEST(SweepSearchTest, TheTuneThenConfirmExamplesExpand) {
  for (const auto& [file, trials] :
       {std::pair<std::string, size_t>{"tune-then-confirm.yaml", 60},
        std::pair<std::string, size_t>{"tune-then-confirm-cpu.yaml", 30}}) {
    std::ifstream in(std::string(SPHERET_SOURCE_DIR) + "/examples/" + file);
    std::stringstream text;
    text << in.rdbuf();
    const std::vector<TrialSpec> expanded = Expand(text.str());
    EXPECT_EQ(expanded.size(), trials) << file;
    std::set<std::string> groups;
    for (const TrialSpec& trial : expanded) groups.insert(trial.search_group);
    EXPECT_EQ(groups.size(), 5u) << file << ": one search per method";
    absl::StatusOr<SweepSpec> spec = ParseSweepSpec(text.str());
    ASSERT_TRUE(spec.ok());
    EXPECT_EQ(spec->search.confirm_seeds.size(), 3u);
  }
}

}  // namespace
}  // namespace spheret
