// AutoNorm's random gates and looped models' per-exit validation through whole training runs
// (docs/methods.md §3): the draws are the step's own (the same straight and resumed), uniform over
// the candidates, and every exit's val loss is reported beside val/loss.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "tests/worker/train/tiny_config.h"
#include "worker/text/prepare.h"
#include "worker/train/trainer.h"

namespace spheret::train {
namespace {

namespace fs = std::filesystem;

// metric name -> step -> value.
using Metrics = std::map<std::string, std::map<int64_t, double>>;

class LoopedAutoNormTrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("spheret_looped_" + std::to_string(::getpid()));
    ASSERT_EQ(testing::PrepareTinyData(dir_), absl::OkStatus());
  }
  void TearDown() override { fs::remove_all(dir_); }

  TrainConfig Config(const std::vector<std::string>& overrides) const {
    TrainConfig config = testing::TinyTrainConfig((dir_ / "data").string());
    for (const std::string& set : overrides) EXPECT_TRUE(ApplyConfigOverride(set, &config).ok());
    EXPECT_EQ(FinalizeConfig(&config), absl::OkStatus());
    return config;
  }

  // Trains (or resumes) into `run` and returns its metric events.
  Metrics Train(const TrainConfig& config, const std::string& run, bool resume) {
    std::ostringstream events_text, log;
    EventWriter events(&events_text);
    const TrainResult outcome =
        spheret::train::Train(config, {(dir_ / run).string(), resume}, &events, &log);
    EXPECT_EQ(outcome.status, absl::OkStatus());
    Metrics metrics;
    std::istringstream lines(events_text.str());
    for (std::string line; std::getline(lines, line);) {
      const nlohmann::json event = nlohmann::json::parse(line);
      if (event["type"] == "diag") {  // typed per-layer values, kept here as FIELD/LAYER/SUBLAYER
        for (const auto& [field, value] : event["values"].items()) {
          if (value.is_null()) continue;
          metrics[field + "/" + std::to_string(event["layer"].get<int64_t>()) + "/" +
                  event["sublayer"].get<std::string>()][event["step"].get<int64_t>()] =
              value.get<double>();
        }
        continue;
      }
      if (event["type"] != "metric" || event["value"].is_null()) continue;
      metrics[event["name"]][event["step"].get<int64_t>()] = event["value"].get<double>();
    }
    return metrics;
  }

  fs::path dir_;
};

const std::array<std::string, 4> kGates = {"gate_choice/1/attn", "gate_choice/1/mlp",
                                           "gate_choice/2/attn", "gate_choice/2/mlp"};

TEST_F(LoopedAutoNormTrainerTest, RandomGatesAreEachStepsOwnUniformDraw) {
  const TrainConfig config = Config({"method=autonorm", "autonorm_mode=random", "diag_interval=1"});
  const Metrics straight = Train(config, "random", false);
  std::array<int64_t, 4> counts{};
  int changes = 0;
  for (const std::string& gate : kGates) {
    ASSERT_EQ(straight.at(gate).size(), 40u) << gate;
    for (const auto& [step, choice] : straight.at(gate)) {
      ++counts.at(static_cast<size_t>(choice));
      changes += step > 0 && choice != straight.at(gate).at(step - 1);
    }
  }
  // 160 draws: chi-square (3 degrees of freedom) below 16.27 with probability 0.999 for uniform
  // draws; a constant gate gives 480.
  double chi = 0;
  for (int64_t c : counts) chi += std::pow(static_cast<double>(c) - 40.0, 2) / 40.0;
  EXPECT_LT(chi, 16.27) << counts[0] << " " << counts[1] << " " << counts[2] << " " << counts[3];
  EXPECT_GT(changes, 60);  // 156 step-to-step pairs, 3/4 of them change for uniform draws

  // The draw is a function of (seed, step): a run resumed at step 20 draws what the straight one
  // drew, and trains bitwise the same; another seed draws otherwise.
  TrainConfig first_half = config;
  first_half.max_iters = 20;
  Train(first_half, "random_resumed", false);
  const Metrics resumed = Train(config, "random_resumed", true);
  for (const std::string& gate : kGates) {
    for (int64_t step = 20; step < 40; ++step) {
      EXPECT_EQ(resumed.at(gate).at(step), straight.at(gate).at(step)) << gate << " " << step;
    }
  }
  for (const auto& [step, loss] : resumed.at("train/loss")) {
    EXPECT_EQ(loss, straight.at("train/loss").at(step)) << "step " << step;
  }
  TrainConfig other_seed = config;
  other_seed.seed = 7;
  other_seed.max_iters = 10;
  const Metrics other = Train(other_seed, "random_seed7", false);
  int differ = 0;
  for (const std::string& gate : kGates) {
    for (int64_t step = 0; step < 10; ++step) {
      differ += other.at(gate).at(step) != straight.at(gate).at(step);
    }
  }
  EXPECT_GT(differ, 10);
}

TEST_F(LoopedAutoNormTrainerTest, RandomFixedGatesKeepOneDrawForTheWholeRun) {
  const TrainConfig config =
      Config({"method=autonorm", "autonorm_mode=random_fixed", "diag_interval=5"});
  const Metrics straight = Train(config, "fixed", false);
  TrainConfig first_half = config;
  first_half.max_iters = 20;
  Train(first_half, "fixed_resumed", false);
  const Metrics resumed = Train(config, "fixed_resumed", true);
  for (const std::string& gate : kGates) {
    const double first = straight.at(gate).at(0);
    for (const auto& [step, choice] : straight.at(gate)) EXPECT_EQ(choice, first) << gate << step;
    for (const auto& [step, choice] : resumed.at(gate)) EXPECT_EQ(choice, first) << gate << step;
    EXPECT_EQ(straight.at("gate_prob" + gate.substr(11)).at(35), 1.0);
  }
}

TEST_F(LoopedAutoNormTrainerTest, LoopedModelsReportEveryExitsValidationLoss) {
  for (const char* norm : {"none", "sphere", "rmsnorm"}) {
    SCOPED_TRACE(norm);
    const TrainConfig config =
        Config({"loops=2", "per_loop_loss=true", std::string("inter_loop_norm=") + norm});
    const Metrics straight = Train(config, std::string("looped_") + norm, false);
    for (int64_t step : {0, 10, 20, 30, 40}) {
      const double last = straight.at("val/loop_loss/2").at(step);
      EXPECT_EQ(last, straight.at("val/loss").at(step)) << "val/loss is the last exit's";
      for (int k : {1, 2}) {
        const double loss = straight.at("val/loop_loss/" + std::to_string(k)).at(step);
        EXPECT_TRUE(std::isfinite(loss));
        EXPECT_EQ(straight.at("val/loop_ppl/" + std::to_string(k)).at(step), std::exp(loss));
      }
    }
    EXPECT_FALSE(straight.count("val/loop_loss/3"));
    // The first exit trains too (per-loop loss): its val loss falls from its start.
    EXPECT_LT(straight.at("val/loop_loss/1").at(40), straight.at("val/loop_loss/1").at(0) - 0.5);
    TrainConfig first_half = config;
    first_half.max_iters = 20;
    Train(first_half, std::string("looped_resumed_") + norm, false);
    const Metrics resumed = Train(config, std::string("looped_resumed_") + norm, true);
    for (const auto& [step, loss] : resumed.at("train/loss")) {
      EXPECT_EQ(loss, straight.at("train/loss").at(step)) << "step " << step;
    }
    EXPECT_EQ(resumed.at("val/loop_loss/1").at(40), straight.at("val/loop_loss/1").at(40));
  }
  const Metrics unlooped = Train(Config({"max_iters=10"}), "unlooped", false);
  EXPECT_FALSE(unlooped.count("val/loop_loss/1"));
  EXPECT_TRUE(unlooped.count("val/loss"));
}

}  // namespace
}  // namespace spheret::train
