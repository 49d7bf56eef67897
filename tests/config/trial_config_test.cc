// The typed view of a trial's config (config/trial_config.h) and the knob text every table, label
// and config error writes (config/knob_text.h).
#include "config/trial_config.h"

#include <gtest/gtest.h>

#include "config/knob_text.h"

namespace spheret {
namespace {

TEST(TrialConfigTest, ReadsTheKnobsOfTheCanonicalText) {
  const std::string text = R"({"method":"p_spheret","p":0.5,"scale":"xs","seed":1337})";
  const TrialConfig config(text);
  EXPECT_TRUE(config.is_object());
  EXPECT_EQ(config.text(), text);
  EXPECT_EQ(config.KnobText("method"), "p_spheret");
  EXPECT_EQ(config.KnobText("p"), "0.5");
  EXPECT_EQ(config.KnobText("seed"), "1337");
  EXPECT_EQ(config.KnobText("dataset"), "") << "a knob the config does not set";
  ASSERT_NE(config.Find("p"), nullptr);
  EXPECT_DOUBLE_EQ(config.Find("p")->get<double>(), 0.5);
  EXPECT_EQ(config.Find("dataset"), nullptr);
}

TEST(TrialConfigTest, ATextThatIsNotAnObjectHasNoKeys) {
  for (const char* text : {"", "not json", "[1]", "5"}) {
    const TrialConfig config(text);
    EXPECT_FALSE(config.is_object()) << text;
    EXPECT_TRUE(config.object().empty()) << text;
    EXPECT_EQ(config.Find("method"), nullptr) << text;
    EXPECT_FALSE(config.Resolve().ok()) << text;
  }
}

TEST(TrialConfigTest, ResolvesAsTheTrainerDoes) {
  absl::StatusOr<TrainConfig> resolved = TrialConfig(R"({"dataset":"d","scale":"xs"})").Resolve();
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->n_layer, 4) << "the xs preset";
  absl::StatusOr<TrainConfig> refused = TrialConfig(R"({"lerning_rate":1})").Resolve();
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("lerning_rate"), std::string::npos);
}

TEST(KnobTextTest, NumbersInTheirShortestNaturalForm) {
  EXPECT_EQ(NumberText(0.5), "0.5");
  EXPECT_EQ(NumberText(1.0), "1");
  EXPECT_EQ(NumberText(0.001), "0.001");
  EXPECT_EQ(NumberText(1e7), "1e+07");
  EXPECT_EQ(NumberText(1e7, 16), "10000000");
  EXPECT_EQ(NumberText(1.0 / 3), "0.333333");
  EXPECT_EQ(KnobValueText(nlohmann::json("geonorm")), "geonorm");
  EXPECT_EQ(KnobValueText(nlohmann::json(6e-4)), "0.0006");
  EXPECT_EQ(KnobValueText(nlohmann::json(1337)), "1337");
  EXPECT_EQ(KnobValueText(nlohmann::json(true)), "true");
}

}  // namespace
}  // namespace spheret
