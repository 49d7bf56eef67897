// The trainer's geometry through whole runs: Code 1's linear decay, Proposition 6's rows at
// every logged step, the update Jacobians against their bounds, and ScaleNorm per method.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "tests/worker/train/tiny_config.h"
#include "worker/text/prepare.h"
#include "worker/train/trainer.h"

namespace spheret::train {
namespace {

namespace fs = std::filesystem;

class TrainerGeometryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("spheret_geometry_" + std::to_string(::getpid()));
    ASSERT_EQ(testing::PrepareTinyData(dir_), absl::OkStatus());
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Trains `config` into `run` and returns its events (JSON lines).
  std::string Events(const TrainConfig& config, const std::string& run) {
    std::ostringstream events_text, log;
    EventWriter events(&events_text);
    EXPECT_EQ(Train(config, {(dir_ / run).string(), false}, &events, &log).status,
              absl::OkStatus());
    return events_text.str();
  }

  fs::path dir_;
};

// The diag events of a run: (step, layer, sublayer) -> field -> value.
using DiagRows = std::map<std::tuple<int64_t, int64_t, std::string>, std::map<std::string, double>>;
DiagRows ParseDiagRows(const std::string& events) {
  DiagRows rows;
  std::istringstream lines(events);
  for (std::string line; std::getline(lines, line);) {
    const nlohmann::json event = nlohmann::json::parse(line);
    if (event["type"] != "diag") continue;
    auto& row = rows[{event["step"].get<int64_t>(), event["layer"].get<int64_t>(),
                      event["sublayer"].get<std::string>()}];
    for (const auto& [field, value] : event["values"].items()) {
      row[field] = value.is_null() ? std::nan("") : value.get<double>();
    }
  }
  return rows;
}

// Code 1's linear decay through the trainer: with decay=linear every update of the last block
// is the identity (theta = 0 at every logged step) and lambda_1 = (L - 1)/L (alpha_1 at step 0);
// Proposition 6's values and the depth sums arrive on every logged step.
TEST_F(TrainerGeometryTest, LinearDecayLogsThetaZeroForTheLastBlockAndProposition6EveryStep) {
  TrainConfig config = testing::TinyTrainConfig((dir_ / "data").string());
  for (const char* set : {"method=geonorm", "decay=linear", "diag_interval=1", "max_iters=12",
                          "n_layer=3", "jacobian_interval=6", "jacobian_iters=8"}) {
    ASSERT_EQ(ApplyConfigOverride(set, &config), absl::OkStatus());
  }
  ASSERT_EQ(FinalizeConfig(&config), absl::OkStatus());
  std::string events;
  events = Events(config, "linear");
  const DiagRows rows = ParseDiagRows(events);
  int last_block_rows = 0;
  for (int64_t step = 0; step < 12; ++step) {
    for (const char* sub : {"attn", "mlp"}) {
      const auto& last = rows.at({step, 3, sub});
      EXPECT_EQ(last.at("theta"), 0.0) << "step " << step << " " << sub;
      EXPECT_EQ(last.at("alpha"), 0.0);
      ++last_block_rows;
      const auto& first = rows.at({step, 1, sub});
      for (const char* field : {"b_norm", "eta", "delta", "margin", "theta2", "token_cos"}) {
        EXPECT_TRUE(first.count(field)) << field << " at step " << step;
      }
    }
    const auto& model = rows.at({step, 0, "model"});
    for (const char* field : {"delta_sum", "theta2_sum", "bound_max", "bound_min"}) {
      EXPECT_TRUE(model.count(field)) << field << " at step " << step;
    }
    EXPECT_NEAR(model.at("bound_max"), std::exp(model.at("delta_sum")), 1e-9);
    // 6 updates: whole dyadic intervals I_1 = {1}, I_2 = {2, 3}; I_4 = {4..7} does not fit.
    EXPECT_TRUE(rows.count({step, 1, "dyadic"}) && rows.count({step, 2, "dyadic"}));
    EXPECT_FALSE(rows.count({step, 4, "dyadic"}));
  }
  EXPECT_EQ(last_block_rows, 24);
  EXPECT_NEAR(rows.at({0, 1, "attn"}).at("alpha"), 2.0 / 3.0, 1e-6);  // lambda_1 = (L-1)/L
  const auto& jacobian = rows.at({6, 1, "attn"});
  EXPECT_LE(jacobian.at("jac_sigma_max"), jacobian.at("jac_bound_max") + 1e-4);
  EXPECT_GE(jacobian.at("jac_sigma_max"), 1.0 - 1e-4);  // norm preservation: ||J|| >= 1
  // sigma_min as an interval: 8 Krylov steps of T C = 512 dimensions certify no lower end.
  EXPECT_GT(jacobian.at("jac_sigma_min_upper"), 0.0);
  EXPECT_EQ(jacobian.at("jac_sigma_min_lower"), 0.0);
  EXPECT_FALSE(jacobian.count("jac_sigma_min")) << "the uncertified field is gone";
  const auto& model = rows.at({6, 0, "model"});
  EXPECT_TRUE(model.count("e2e_sigma_max"));
  EXPECT_GT(model.at("e2e_sigma_min_upper"), 0.0);
  EXPECT_LE(model.at("e2e_sigma_min_upper"), model.at("e2e_sigma_max") * (1 + 1e-12));
  EXPECT_EQ(model.at("e2e_sigma_min_lower"), 0.0);
}

// A fresh geonorm run's first hidden norm is ||wte + wpe|| (no ScaleNorm, Eq. 3) unless
// scalenorm=true; a SpheretNorm type keeps sqrt(C).
TEST_F(TrainerGeometryTest, GeoNormHasNoScaleNormUnlessAskedAndSpheretNormKeepsSqrtC) {
  for (const auto& [sets, scaled] : std::vector<std::pair<std::vector<std::string>, bool>>{
           {{"method=geonorm"}, false},
           {{"method=geonorm", "scalenorm=true"}, true},
           {{"method=proj_spheret"}, true}}) {
    TrainConfig config = testing::TinyTrainConfig((dir_ / "data").string());
    for (const std::string& set : sets)
      ASSERT_EQ(ApplyConfigOverride(set, &config), absl::OkStatus());
    ASSERT_EQ(ApplyConfigOverride("diag_interval=1", &config), absl::OkStatus());
    ASSERT_EQ(ApplyConfigOverride("max_iters=1", &config), absl::OkStatus());
    ASSERT_EQ(FinalizeConfig(&config), absl::OkStatus());
    std::string events;
    events = Events(config, sets.back().substr(0, 6) + std::to_string(sets.size()));
    const double norm = ParseDiagRows(events).at({0, 1, "attn"}).at("hidden_norm");
    if (scaled) {
      EXPECT_NEAR(norm, std::sqrt(32.0), 1e-4) << sets.back();
    } else {
      // ||wte[idx] + wpe[pos]|| with N(0, 0.02) weights: about 0.02 sqrt(2C) = 0.16, far from 5.66.
      EXPECT_LT(norm, 0.5) << sets.back();
    }
  }
}

}  // namespace
}  // namespace spheret::train
