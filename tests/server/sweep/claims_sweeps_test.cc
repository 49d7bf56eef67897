// The sweeps of `make claims-cpu` (examples/claims-cpu/): each expands to the trials the study
// needs, and the ScaleNorm and angle-cap sweeps pair with the methods sweep on everything but the
// knob they test, so the claims report compares each method with itself.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "config/train_config.h"
#include "config/trial_config.h"
#include "server/sweep/sweep_expand.h"
#include "server/sweep/sweep_spec.h"

namespace spheret {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kClaimsDir = fs::path(SPHERET_SOURCE_DIR) / "examples" / "claims-cpu";

// The effective configs of a sweep file's trials, resolved as the trainer resolves them.
std::vector<json> Effective(const std::string& file) {
  std::ifstream in(kClaimsDir / file);
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<SweepSpec> spec = ParseSweepSpec(text.str());
  EXPECT_TRUE(spec.ok()) << file << ": " << spec.status();
  if (!spec.ok()) return {};
  absl::StatusOr<std::vector<TrialSpec>> trials = ExpandSweep(*spec);
  EXPECT_TRUE(trials.ok()) << file << ": " << trials.status();
  std::vector<json> configs;
  for (const TrialSpec& trial : trials.value_or(std::vector<TrialSpec>{})) {
    absl::StatusOr<TrainConfig> resolved = TrialConfig(trial.config_json).Resolve();
    EXPECT_TRUE(resolved.ok()) << file << ": " << resolved.status();
    if (resolved.ok()) configs.push_back(ConfigToJson(*resolved));
  }
  return configs;
}

// The keys whose values differ between two effective configs.
std::vector<std::string> Differences(const json& a, const json& b) {
  std::vector<std::string> keys;
  for (auto it = a.begin(); it != a.end(); ++it) {
    if (!b.contains(it.key()) || b.at(it.key()) != it.value()) keys.push_back(it.key());
  }
  return keys;
}

// The methods sweep's trial of the same method, p and seed.
const json* Partner(const std::vector<json>& methods, const json& config) {
  for (const json& candidate : methods) {
    if (candidate.at("method") == config.at("method") && candidate.at("p") == config.at("p") &&
        candidate.at("seed") == config.at("seed")) {
      return &candidate;
    }
  }
  return nullptr;
}

TEST(ClaimsCpuSweepsTest, TheEightRowsThreeSeedsEachAtTheirDefaults) {
  const std::vector<json> methods = Effective("methods.yaml");
  ASSERT_EQ(methods.size(), 24u) << "8 rows x 3 seeds";
  std::map<std::string, int> scalenorm_on;
  for (const json& config : methods) {
    EXPECT_GE(config.at("max_iters").get<int64_t>(), 500) << "past the collapse phase";
    scalenorm_on[config.at("method").get<std::string>()] += config.at("scalenorm").get<bool>();
  }
  EXPECT_EQ(scalenorm_on, (std::map<std::string, int>{{"geonorm", 0},
                                                      {"keel", 0},
                                                      {"p_spheret", 9},
                                                      {"peri_ln", 0},
                                                      {"pre_dyt", 0},
                                                      {"pre_ln", 0}}));
}

TEST(ClaimsCpuSweepsTest, TheScaleNormAndCapSweepsDifferFromTheirPartnersInThatKnobOnly) {
  const std::vector<json> methods = Effective("methods.yaml");
  const std::vector<std::pair<std::string, std::string>> sweeps = {
      {"scalenorm.yaml", "scalenorm"}, {"angle-cap.yaml", "angle_max"}};
  for (const auto& [file, knob] : sweeps) {
    const std::vector<json> trials = Effective(file);
    EXPECT_EQ(trials.size(), 6u) << file;
    for (const json& config : trials) {
      const json* partner = Partner(methods, config);
      ASSERT_NE(partner, nullptr) << file << ": " << config.dump();
      EXPECT_EQ(Differences(config, *partner), std::vector<std::string>{knob}) << file;
    }
  }
}

}  // namespace
}  // namespace spheret
