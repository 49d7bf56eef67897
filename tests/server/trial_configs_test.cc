// A trial's config in the coordinator (server/trial_configs.h): read once where the record enters,
// shared by the record's copies, and derived configs built from the typed value.
#include "server/trial_configs.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace spheret {
namespace {

TEST(TrialConfigsTest, ARecordIsTypedOnceAndItsCopiesShareTheValue) {
  TrialRecord trial;
  trial.config_json = R"({"method":"pre_ln","scale":"xs","seed":3})";
  EXPECT_FALSE(ConfigOf(trial).is_object()) << "an untyped record reads as no keys";
  TypeTrial(&trial);
  ASSERT_NE(trial.config, nullptr);
  const TrialConfig* typed = trial.config.get();
  TypeTrial(&trial);
  EXPECT_EQ(trial.config.get(), typed) << "typed once: a second TypeTrial keeps the value";
  const TrialRecord copy = trial;
  EXPECT_EQ(&ConfigOf(copy), typed) << "a copy shares the value, it does not parse again";
  EXPECT_EQ(ConfigOf(copy).KnobText("seed"), "3");
  EXPECT_EQ(ConfigOf(copy).text(), trial.config_json);
}

TEST(TrialConfigsTest, ADerivedConfigSetsKeysOfTheTypedValueAndResolvesWithoutText) {
  const TrialConfig trained(R"({"method":"pre_ln","scale":"xs","seed":3})");
  const nlohmann::json job =
      ConfigWith(trained, {{"eval_tasks", "hellaswag"}, {"eval_data", "zeroshot"}});
  EXPECT_EQ(
      job.dump(),
      R"({"eval_data":"zeroshot","eval_tasks":"hellaswag","method":"pre_ln","scale":"xs","seed":3})");
  EXPECT_EQ(trained.Find("eval_tasks"), nullptr) << "the trial's own config is left as it was";
  EXPECT_TRUE(ResolveConfigObject(job).ok());
  const absl::StatusOr<TrainConfig> refused =
      ResolveConfigObject(ConfigWith(trained, {{"eval_tasks", "no_such_task"}}));
  EXPECT_FALSE(refused.ok());
  EXPECT_EQ(ResolveConfigObject(nlohmann::json::array()).status().message(),
            "the trial's config is not a JSON object");
}

}  // namespace
}  // namespace spheret
