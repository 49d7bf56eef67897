// Confounds between the rows of a comparison (client/report/confounds.h), from effective configs.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "client/report/confounds.h"

namespace spheret::client {
namespace {

using nlohmann::json;

struct Fixture {
  std::vector<TrialConfig> configs;
  std::vector<ConfoundTrial> trials;
  void Add(const std::string& row, const std::string& column, json config) {
    configs.emplace_back(config.dump());
    trials.push_back({row, column, nullptr});
  }
  std::vector<Confound> Find(const std::set<std::string>& identity = DefaultIdentityKeys()) {
    for (size_t i = 0; i < trials.size(); ++i) trials[i].config = &configs[i].object();
    return FindConfounds(trials, identity);
  }
};

json Config(const std::string& method, int seed) {
  return {{"method", method}, {"scale", "xs"}, {"seed", seed}, {"dataset", "fortunes"}};
}

TEST(FindConfounds, TheDefaultScaleNormPairingIsAConfoundOfTheMethodRows) {
  // Nothing in the stored configs but the method: the trainer's defaults put ScaleNorm on for
  // p_spheret and off for geonorm and pre_ln, and the effective configs show it.
  Fixture f;
  for (int seed : {1, 2}) {
    f.Add("Pre-LN", "xs", Config("pre_ln", seed));
    f.Add("GeoNorm", "xs", Config("geonorm", seed));
    json p = Config("p_spheret", seed);
    p["p"] = 0.5;
    f.Add("p-SpheretNorm (p=0.5)", "xs", p);
  }
  const std::vector<Confound> confounds = f.Find();
  ASSERT_EQ(confounds.size(), 1u) << ConfoundField(confounds);
  EXPECT_EQ(ConfoundSentence(confounds[0]),
            "rows also differ in scalenorm: off for Pre-LN, GeoNorm; on for p-SpheretNorm (p=0.5)");
}

TEST(FindConfounds, NoneWhenOnlyTheMethodAndSeedDiffer) {
  Fixture f;
  for (int seed : {1, 2, 3}) {
    f.Add("Pre-LN", "xs", Config("pre_ln", seed));
    json geo = Config("geonorm", seed);
    geo["scalenorm"] = false;
    f.Add("GeoNorm", "xs", geo);
    json keel = Config("keel", seed);
    keel["decay"] = "sqrt";  // a knob set explicitly at its default: no difference
    f.Add("Keel", "xs", keel);
  }
  EXPECT_TRUE(f.Find().empty()) << ConfoundField(f.Find());
  EXPECT_EQ(ConfoundField({}), "");
}

TEST(FindConfounds, AnyKnobSetPerRowIsFoundWithoutAListOfKnobs) {
  // weight_decay set on one row through `with:`, a knob this code never names; and a key this
  // version does not know (a config it cannot resolve keeps its stored keys).
  Fixture f;
  for (int seed : {1, 2}) {
    f.Add("Pre-LN", "xs", Config("pre_ln", seed));
    json decayed = Config("peri_ln", seed);
    decayed["weight_decay"] = 0.05;
    f.Add("Peri-LN", "xs", decayed);
  }
  const std::vector<Confound> confounds = f.Find();
  ASSERT_EQ(confounds.size(), 1u) << ConfoundField(confounds);
  EXPECT_EQ(confounds[0].key, "weight_decay");
  EXPECT_EQ(ConfoundField(confounds), "weight_decay: 0.1 (Pre-LN); 0.05 (Peri-LN)");

  Fixture unknown;
  json future = Config("pre_ln", 1);
  future["knob_from_the_future"] = 3;
  unknown.Add("A", "xs", future);
  unknown.Add("B", "xs", Config("pre_ln", 1));
  const std::vector<Confound> found = unknown.Find();
  EXPECT_EQ(ConfoundField(found), "knob_from_the_future: 3 (A); unset (B)");
}

TEST(FindConfounds, ComparesWithinAColumnAndHonoursTheIdentityKeys) {
  // The learning rate follows the scale (one value per column): not a confound. Within xs the
  // rows differ in angle_max, which is the identity of an angle-cap table's rows.
  Fixture f;
  for (const char* scale : {"xs", "s-cpu"}) {
    const double lr = std::string(scale) == "xs" ? 1e-3 : 6e-4;
    json capped = Config("geonorm", 1);
    capped["scale"] = scale;
    capped["learning_rate"] = lr;
    json open = capped;
    open["angle_max"] = "none";
    f.Add("GeoNorm", scale, capped);
    f.Add("GeoNorm angle_max=none", scale, open);
  }
  std::vector<Confound> confounds = f.Find();
  ASSERT_EQ(confounds.size(), 1u) << ConfoundField(confounds);
  EXPECT_EQ(confounds[0].key, "angle_max");
  confounds = f.Find({"method", "p", "seed", "angle_max"});
  EXPECT_TRUE(confounds.empty()) << ConfoundField(confounds);
}

TEST(FindConfounds, ARowWhoseSeedsDisagreeIsListedUnderEachValue) {
  Fixture f;
  json a1 = Config("pre_ln", 1), a2 = Config("pre_ln", 2);
  a2["beta2"] = 0.99;
  f.Add("A", "xs", a1);
  f.Add("A", "xs", a2);
  f.Add("B", "xs", Config("keel", 1));
  f.Add("B", "xs", Config("keel", 2));
  const std::vector<Confound> confounds = f.Find();
  ASSERT_EQ(confounds.size(), 1u);
  EXPECT_EQ(ConfoundField(confounds), "beta2: 0.95 (A, B); 0.99 (A)");
}

}  // namespace
}  // namespace spheret::client
