#include "worker/train/train_config.h"

#include <gtest/gtest.h>

namespace spheret::train {
namespace {

using nlohmann::json;

TEST(TrainConfigTest, AppliesKeysAndOverrides) {
  TrainConfig config;
  ASSERT_EQ(ApplyConfigJson(json{{"method", "p_spheret"},
                                 {"p", 0.5},
                                 {"scale", "xs"},
                                 {"decay", "harmonic"},
                                 {"learning_rate", 1e-3}},
                            &config),
            "");
  ASSERT_EQ(ApplyConfigOverride("max_iters=40", &config), "");
  ASSERT_EQ(ApplyConfigOverride("inner_norm=rmsnorm", &config), "");
  ASSERT_EQ(FinalizeConfig(&config), "");
  EXPECT_EQ(config.connection.method, nn::Method::kPSpheret);
  EXPECT_DOUBLE_EQ(config.connection.p, 0.5);
  EXPECT_EQ(config.n_layer, 4);
  EXPECT_EQ(config.n_embd, 128);
  EXPECT_EQ(config.connection.n_embd, 128);
  EXPECT_EQ(config.max_iters, 40);
  EXPECT_EQ(config.connection.inner_norm, nn::NormKind::kRmsNorm);
  const json round_trip = ConfigToJson(config);
  EXPECT_EQ(round_trip["method"], "p_spheret");
  EXPECT_EQ(round_trip["decay"], "harmonic");
  EXPECT_EQ(round_trip.size(), ConfigKeys().size());
  TrainConfig again;
  ASSERT_EQ(ApplyConfigJson(round_trip, &again), "");
  EXPECT_EQ(ConfigToJson(again), round_trip);
}

TEST(TrainConfigTest, RefusesUnknownKeysAndBadValuesNamingTheKey) {
  TrainConfig config;
  EXPECT_EQ(ApplyConfigJson(json{{"lerning_rate", 1e-3}}, &config),
            "unknown config key 'lerning_rate'");
  EXPECT_EQ(ApplyConfigJson(json{{"max_iters", "many"}}, &config),
            "config key 'max_iters' must be an integer, got \"many\"");
  EXPECT_EQ(ApplyConfigJson(json{{"method", "sphere"}}, &config),
            "config key 'method' must be one of pre_ln, post_ln, pre_dyt, peri_ln, keel, geonorm, "
            "proj_spheret, cay_spheret, p_spheret, got \"sphere\"");
  EXPECT_EQ(ApplyConfigOverride("batch_size", &config),
            "override 'batch_size' must look like key=value");
  config = TrainConfig();
  config.scale = "XL";
  EXPECT_NE(FinalizeConfig(&config).find("'scale'"), std::string::npos);
  config = TrainConfig();
  config.connection.p = -1;
  EXPECT_EQ(FinalizeConfig(&config), "config: p must be a finite number > 0, got -1");
  config = TrainConfig();
  config.warmup_iters = 500;
  config.lr_decay_iters = 100;
  EXPECT_NE(FinalizeConfig(&config).find("lr_decay_iters"), std::string::npos);
  config = TrainConfig();
  config.batch_shards = 13;
  EXPECT_EQ(FinalizeConfig(&config),
            "config key 'batch_shards' (13) must be at most batch_size (12)");
  config = TrainConfig();
  config.batch_shards = 2;
  config.device = "cuda";
  EXPECT_NE(FinalizeConfig(&config).find("'batch_shards' above 1 is for device cpu"),
            std::string::npos);
  config = TrainConfig();
  config.batch_shards = 2;
  config.dropout = 0.1;
  EXPECT_NE(FinalizeConfig(&config).find("'batch_shards' above 1 needs dropout 0"),
            std::string::npos);
  config = TrainConfig();
  config.batch_shards = -1;
  EXPECT_EQ(FinalizeConfig(&config), "config key 'batch_shards' must be >= 0");
}

}  // namespace
}  // namespace spheret::train
