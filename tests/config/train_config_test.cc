#include "config/train_config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

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
            absl::OkStatus());
  ASSERT_EQ(ApplyConfigOverride("max_iters=40", &config), absl::OkStatus());
  ASSERT_EQ(ApplyConfigOverride("inner_norm=rmsnorm", &config), absl::OkStatus());
  ASSERT_EQ(FinalizeConfig(&config), absl::OkStatus());
  EXPECT_EQ(config.connection.method, Method::kPSpheret);
  EXPECT_DOUBLE_EQ(config.connection.p, 0.5);
  EXPECT_EQ(config.n_layer, 4);
  EXPECT_EQ(config.n_embd, 128);
  EXPECT_EQ(config.connection.n_embd, 128);
  EXPECT_EQ(config.max_iters, 40);
  EXPECT_EQ(config.connection.inner_norm, NormKind::kRmsNorm);
  const json round_trip = ConfigToJson(config);
  EXPECT_EQ(round_trip["method"], "p_spheret");
  EXPECT_EQ(round_trip["decay"], "harmonic");
  // Every key but connection_script (the scripted connection's bytes; connection_sha256 names them).
  EXPECT_EQ(round_trip.size(), ConfigKeys().size() - 1);
  EXPECT_FALSE(round_trip.contains("connection_script"));
  TrainConfig again;
  ASSERT_EQ(ApplyConfigJson(round_trip, &again), absl::OkStatus());
  EXPECT_EQ(ConfigToJson(again), round_trip);
}

// angle_max: a number in (0, pi/2] or "none" (the uncapped update), written back as given.
TEST(TrainConfigTest, AngleMaxNoneRemovesTheCapAndRoundTrips) {
  TrainConfig config;
  ASSERT_EQ(ApplyConfigOverride("angle_max=none", &config), absl::OkStatus());
  ASSERT_EQ(ApplyConfigOverride("method=cay_spheret", &config), absl::OkStatus());
  ASSERT_EQ(FinalizeConfig(&config), absl::OkStatus());
  EXPECT_TRUE(std::isinf(config.connection.angle_max));
  EXPECT_EQ(ConfigToJson(config)["angle_max"], "none");
  EXPECT_EQ(ValidateConnectionOptions(config.connection), absl::OkStatus());
  ASSERT_EQ(ApplyConfigOverride("angle_max=0.5", &config), absl::OkStatus());
  EXPECT_EQ(ConfigToJson(config)["angle_max"], 0.5);
  EXPECT_EQ(ApplyConfigOverride("angle_max=never", &config).message(),
            "config key 'angle_max' must be a number or \"none\", got \"never\"");
  config.connection.angle_max = 2.0;
  EXPECT_EQ(ValidateConnectionOptions(config.connection).message(),
            "angle_max must be in (0, pi/2] radians or none, got 2");
}

// scalenorm: the method's default (§4.2: on for the three SpheretNorm types, off for GeoNorm)
// unless given; the effective value is what the config says it is.
TEST(TrainConfigTest, ScaleNormDefaultsFollowTheMethodAndAnExplicitValueWins) {
  const std::vector<std::pair<std::string, bool>> defaults = {{"geonorm", false},
                                                              {"proj_spheret", true},
                                                              {"cay_spheret", true},
                                                              {"p_spheret", true},
                                                              {"pre_ln", false}};
  for (const auto& [method, on] : defaults) {
    TrainConfig config;
    ASSERT_EQ(ApplyConfigOverride("method=" + method, &config), absl::OkStatus());
    ASSERT_EQ(FinalizeConfig(&config), absl::OkStatus());
    EXPECT_EQ(ConfigToJson(config)["scalenorm"], on) << method;
  }
  TrainConfig geonorm;
  ASSERT_EQ(ApplyConfigJson(json{{"method", "geonorm"}, {"scalenorm", true}}, &geonorm),
            absl::OkStatus());
  EXPECT_EQ(ConfigToJson(geonorm)["scalenorm"], true);
  TrainConfig proj;
  ASSERT_EQ(ApplyConfigJson(json{{"method", "proj_spheret"}, {"scalenorm", false}}, &proj),
            absl::OkStatus());
  EXPECT_EQ(ConfigToJson(proj)["scalenorm"], false);
}

TEST(TrainConfigTest, LinearDecayIsFlaggedWhereItMakesUpdatesTheIdentity) {
  // Code 1's linear decay is 0 at the last index: the whole last block (decay_index block), or
  // only its MLP update (sublayer). Residual methods and the other decays have no such note.
  TrainConfig config;
  ASSERT_EQ(ApplyConfigJson(json{{"method", "geonorm"}, {"decay", "linear"}, {"n_layer", 6}},
                            &config),
            absl::OkStatus());
  ASSERT_EQ(FinalizeConfig(&config), absl::OkStatus());
  std::vector<std::string> notes = ConnectionNotes(config.connection, config.n_layer);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("0 at block 6, so both updates of the last block are the identity"),
            std::string::npos)
      << notes[0];
  config.connection.decay_index = DecayIndex::kSublayer;
  notes = ConnectionNotes(config.connection, config.n_layer);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("0 at update 12, so the last MLP update is the identity"),
            std::string::npos)
      << notes[0];
  config.connection.decay = Decay::kSqrt;
  EXPECT_TRUE(ConnectionNotes(config.connection, config.n_layer).empty());
  config.connection.decay = Decay::kLinear;
  config.connection.method = Method::kPreLn;
  EXPECT_TRUE(ConnectionNotes(config.connection, config.n_layer).empty());
}

TEST(TrainConfigTest, RefusesUnknownKeysAndBadValuesNamingTheKey) {
  TrainConfig config;
  EXPECT_EQ(ApplyConfigJson(json{{"lerning_rate", 1e-3}}, &config).message(),
            "unknown config key 'lerning_rate'");
  EXPECT_EQ(ApplyConfigJson(json{{"max_iters", "many"}}, &config).message(),
            "config key 'max_iters' must be an integer, got \"many\"");
  EXPECT_EQ(ApplyConfigJson(json{{"method", "sphere"}}, &config).message(),
            "config key 'method' must be one of pre_ln, post_ln, pre_dyt, peri_ln, keel, geonorm, "
            "proj_spheret, cay_spheret, p_spheret, ngpt, autonorm, scripted, got \"sphere\"");
  EXPECT_EQ(ApplyConfigOverride("batch_size", &config).message(),
            "override 'batch_size' must look like key=value");
  config = TrainConfig();
  config.scale = "XL";
  EXPECT_NE(FinalizeConfig(&config).message().find("'scale'"), std::string::npos);
  config = TrainConfig();
  config.connection.p = -1;
  EXPECT_EQ(FinalizeConfig(&config).message(), "config key 'p' must be in (0, 64], got -1");
  config = TrainConfig();
  config.warmup_iters = 500;
  config.lr_decay_iters = 100;
  EXPECT_NE(FinalizeConfig(&config).message().find("lr_decay_iters"), std::string::npos);
  config = TrainConfig();
  config.batch_shards = 13;
  EXPECT_EQ(FinalizeConfig(&config).message(),
            "config key 'batch_shards' (13) must be at most batch_size (12)");
  config = TrainConfig();
  config.batch_shards = 2;
  config.device = "cuda";
  EXPECT_NE(FinalizeConfig(&config).message().find("'batch_shards' above 1 is for device cpu"),
            std::string::npos);
  config = TrainConfig();
  config.batch_shards = 2;
  config.dropout = 0.1;
  EXPECT_NE(FinalizeConfig(&config).message().find("'batch_shards' above 1 needs dropout 0"),
            std::string::npos);
  config = TrainConfig();
  config.batch_shards = -1;
  EXPECT_EQ(FinalizeConfig(&config).message(),
            "config key 'batch_shards' must be in [0, 1048576], got -1");
}

// Item 1 of issue 11: a zero or negative divisor (n_head=0 was SIGFPE), a NaN or an absurd size
// is refused with the key named before anything divides by it or allocates from it.
TEST(TrainConfigTest, DivisionByZeroAndEveryOtherKnobAreRangeChecked) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"n_head=0", "config key 'n_head' must be in [1, 1024], got 0"},
      {"n_head=-4", "config key 'n_head' must be in [1, 1024], got -4"},
      {"n_layer=0", "config key 'n_layer' must be in [1, 1024], got 0"},
      {"n_embd=0", "config key 'n_embd' must be in [1, 65536], got 0"},
      {"eval_interval=0", "config key 'eval_interval' must be in [1, 1000000000000], got 0"},
      {"dropout=1", "config key 'dropout' must be in [0, 1), got 1"},
      {"dropout=-0.5", "config key 'dropout' must be in [0, 1), got -0.5"},
      {"block_size=99999999999",
       "config key 'block_size' must be in [1, 1048576], got 99999999999"},
      {"vocab_size=4294967296", "config key 'vocab_size' must be in [0, 16777216], got 4294967296"},
      {"divergence_loss=0", "config key 'divergence_loss' must be in (0, 1000000000], got 0"},
      {"learning_rate=1e999", "config key 'learning_rate' must be a number, got \"1e999\""},
      {"seed=-1", "config key 'seed' must be in [0, inf), got -1"},
      {"n_head=3", "config key 'n_embd' (128) must be a multiple of n_head (3)"},
  };
  for (const auto& [assignment, message] : cases) {
    TrainConfig config;
    ASSERT_EQ(ApplyConfigOverride("scale=xs", &config), absl::OkStatus());
    const absl::Status refused = ApplyConfigOverride(assignment, &config);
    EXPECT_EQ((refused.ok() ? FinalizeConfig(&config) : refused).message(), message) << assignment;
  }
  TrainConfig infinite;
  infinite.learning_rate = INFINITY;
  EXPECT_EQ(FinalizeConfig(&infinite).message(),
            "config key 'learning_rate' must be in (0, 10], got inf");
  TrainConfig nan;
  nan.beta2 = std::nan("");
  EXPECT_EQ(FinalizeConfig(&nan).message(), "config key 'beta2' must be in [0, 1), got nan");
}

// Item 2 of issue 11: an explicit shape key wins over the scale preset, whatever the order the
// keys come in; the preset fills only the shape keys not given.
TEST(TrainConfigTest, APresetSilentlyOverridesExplicitKnobsNoMoreTheExplicitShapeKeyWins) {
  TrainConfig config;
  ASSERT_EQ(ApplyConfigJson(json{{"scale", "xs"}, {"n_head", 2}}, &config), absl::OkStatus());
  ASSERT_EQ(FinalizeConfig(&config), absl::OkStatus());
  EXPECT_EQ(config.n_head, 2);
  EXPECT_EQ(config.n_layer, 4);   // from xs
  EXPECT_EQ(config.n_embd, 128);  // from xs
  TrainConfig overridden;
  ASSERT_EQ(ApplyConfigOverride("n_layer=2", &overridden), absl::OkStatus());
  ASSERT_EQ(ApplyConfigOverride("scale=s-cpu", &overridden), absl::OkStatus());
  ASSERT_EQ(FinalizeConfig(&overridden), absl::OkStatus());
  EXPECT_EQ(overridden.n_layer, 2);
  EXPECT_EQ(overridden.n_head, 6);
  EXPECT_EQ(ConfigToJson(overridden)["n_layer"], 2);  // what checkpoints and events record
  TrainConfig preset_only;
  ASSERT_EQ(ApplyConfigOverride("scale=xs", &preset_only), absl::OkStatus());
  ASSERT_EQ(FinalizeConfig(&preset_only), absl::OkStatus());
  EXPECT_EQ(preset_only.n_head, 4);
}

// Issue 26: pos_encoding (learned | rope) for every method; ngpt comes with rope and no biases
// (nGPT's recipe) unless a key says otherwise, and refuses biases.
TEST(TrainConfigTest, PosEncodingKnobAndNgptDefaults) {
  TrainConfig plain;
  ASSERT_EQ(FinalizeConfig(&plain), absl::OkStatus());
  EXPECT_EQ(plain.pos_encoding, PosEncoding::kLearned);  // nanoGPT's
  EXPECT_EQ(ConfigToJson(plain)["pos_encoding"], "learned");
  TrainConfig rope;
  ASSERT_EQ(ApplyConfigOverride("pos_encoding=rope", &rope), absl::OkStatus());
  ASSERT_EQ(FinalizeConfig(&rope), absl::OkStatus());
  EXPECT_EQ(rope.pos_encoding, PosEncoding::kRope);
  EXPECT_EQ(rope.connection.method, Method::kPreLn);
  EXPECT_EQ(ConfigToJson(rope)["pos_encoding"], "rope");

  TrainConfig ngpt;
  ASSERT_EQ(ApplyConfigOverride("method=ngpt", &ngpt), absl::OkStatus());
  ASSERT_EQ(FinalizeConfig(&ngpt), absl::OkStatus());
  EXPECT_EQ(ngpt.pos_encoding, PosEncoding::kRope);
  EXPECT_FALSE(ngpt.bias);
  EXPECT_EQ(ngpt.weight_decay, 0.0);
  EXPECT_EQ(ngpt.warmup_iters, 0);
  TrainConfig ngpt_learned;  // the earlier ngpt's n(wte + wpe) stays available on request
  ASSERT_EQ(ApplyConfigJson(json{{"method", "ngpt"}, {"pos_encoding", "learned"}}, &ngpt_learned),
            absl::OkStatus());
  ASSERT_EQ(FinalizeConfig(&ngpt_learned), absl::OkStatus());
  EXPECT_EQ(ngpt_learned.pos_encoding, PosEncoding::kLearned);

  const std::vector<std::pair<std::vector<std::string>, std::string>> refused = {
      {{"pos_encoding=alibi"},
       "config key 'pos_encoding' must be one of learned, rope, got \"alibi\""},
      {{"method=ngpt", "bias=true"},
       "config key 'bias' must be false for method ngpt (nGPT has no biases; it is false unless "
       "set)"},
      {{"pos_encoding=rope", "n_embd=6", "n_head=2"},
       "config key 'pos_encoding' rope needs an even head size n_embd / n_head, got 6 / 2 = 3"},
      {{"method=ngpt", "n_embd=6", "n_head=2"},
       "config key 'pos_encoding' rope needs an even head size n_embd / n_head, got 6 / 2 = 3"},
  };
  for (const auto& [sets, message] : refused) {
    TrainConfig config;
    absl::Status status;
    for (const std::string& set : sets) {
      if (status.ok()) status = ApplyConfigOverride(set, &config);
    }
    EXPECT_EQ((status.ok() ? FinalizeConfig(&config) : status).message(), message) << sets.back();
  }
}

}  // namespace
}  // namespace spheret::train
