// The training loop as a whole: exact resume, method equivalence, checkpoint refusal, overfitting.
#include "worker/train/trainer.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "protocol/trainer_events.h"
#include "tests/worker/train/tiny_config.h"
#include "worker/nn/gpt.h"
#include "worker/text/prepare.h"
#include "worker/train/checkpoint.h"
#include "worker/train/dataset.h"

namespace spheret::train {
namespace {

namespace fs = std::filesystem;

class TrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("spheret_trainer_" + std::to_string(::getpid()));
    ASSERT_EQ(testing::PrepareTinyData(dir_), absl::OkStatus());
  }
  void TearDown() override { fs::remove_all(dir_); }

  TrainConfig Tiny() const {
    TrainConfig config = testing::TinyTrainConfig((dir_ / "data").string());
    config.dropout = 0.1;  // Exercises the dropout RNG across a resume.
    EXPECT_EQ(FinalizeConfig(&config), absl::OkStatus());
    return config;
  }

  // Runs and returns the train/loss values by step; *result gets the outcome.
  std::map<int64_t, double> Losses(const TrainConfig& config, const std::string& run, bool resume,
                                   TrainResult* result = nullptr,
                                   std::string* events_out = nullptr) {
    std::ostringstream events_text, log;
    EventWriter events(&events_text);
    TrainResult outcome = Train(config, {(dir_ / run).string(), resume}, &events, &log);
    EXPECT_EQ(outcome.status, absl::OkStatus());
    if (result != nullptr) *result = outcome;
    if (events_out != nullptr) *events_out = events_text.str();
    std::map<int64_t, double> losses;
    std::istringstream lines(events_text.str());
    for (std::string line; std::getline(lines, line);) {
      const nlohmann::json event = nlohmann::json::parse(line);
      if (event["type"] == "metric" && event["name"] == "train/loss") {
        losses[event["step"].get<int64_t>()] = event["value"].get<double>();
      }
    }
    return losses;
  }

  // Whether `events` (JSON lines) hold a diag event of (layer, sublayer) with a value of `field`.
  static bool HasDiagValue(const std::string& events, int64_t layer, const std::string& sublayer,
                           const std::string& field) {
    std::istringstream lines(events);
    for (std::string line; std::getline(lines, line);) {
      protocol::TrainerEvent event;
      if (!protocol::ParseTrainerEvent(line, &event).ok()) continue;
      const auto* diag = std::get_if<protocol::DiagEvent>(&event);
      if (diag == nullptr || diag->layer != layer || diag->sublayer != sublayer) continue;
      for (const auto& [name, value] : diag->values) {
        if (name == field) return true;
      }
    }
    return false;
  }

  fs::path dir_;
};

TEST_F(TrainerTest, ResumeAfterStepTwentyGivesBitwiseIdenticalLosses) {
  const std::map<int64_t, double> straight = Losses(Tiny(), "straight", false);
  ASSERT_EQ(straight.size(), 40u);
  TrainConfig first_half = Tiny();
  first_half.max_iters = 20;
  std::string events;
  Losses(first_half, "resumed", false, nullptr, &events);
  EXPECT_NE(events.find("\"type\":\"checkpoint\""), std::string::npos);
  TrainResult result;
  const std::map<int64_t, double> second_half = Losses(Tiny(), "resumed", true, &result);
  ASSERT_EQ(second_half.size(), 20u);
  EXPECT_EQ(second_half.begin()->first, 20);
  for (const auto& [step, loss] : second_half) {
    EXPECT_EQ(loss, straight.at(step)) << "step " << step;  // Bitwise, not approximately.
  }
  EXPECT_EQ(result.steps, 40);
}

// The related methods through a stop and resume at step 20: nGPT (weight normalization after
// each step), AutoNorm-S (gates frozen at step 15, so the frozen choice comes back from the
// checkpoint; the Gumbel noise is the step's own), and a looped model with per-loop loss and the
// norm penalty; diag and Jacobian measurements every 10 steps must not move the training stream.
TEST_F(TrainerTest, RelatedMethodsResumeBitwise) {
  const std::vector<std::vector<std::string>> variants = {
      {"method=ngpt"},
      {"method=autonorm", "gate_freeze_step=15"},
      {"method=proj_spheret", "loops=2", "per_loop_loss=true", "loop_loss_weights=0.5,1",
       "norm_penalty=0.1", "readout=rmsnorm"},
  };
  for (const std::vector<std::string>& sets : variants) {
    SCOPED_TRACE(sets.front());
    TrainConfig config = testing::TinyTrainConfig((dir_ / "data").string());
    config.dropout = 0.1;
    config.diag_interval = 10;
    config.jacobian_interval = 10;
    config.jacobian_iters = 3;
    for (const std::string& set : sets)
      ASSERT_EQ(ApplyConfigOverride(set, &config), absl::OkStatus());
    ASSERT_EQ(FinalizeConfig(&config), absl::OkStatus());
    const std::string name = sets.front().substr(7);
    std::string events;
    const std::map<int64_t, double> straight =
        Losses(config, name + "_straight", false, nullptr, &events);
    ASSERT_EQ(straight.size(), 40u);
    EXPECT_TRUE(HasDiagValue(events, 2, "mlp", "jac_sigma_max")) << "a typed diag event";
    EXPECT_TRUE(HasDiagValue(events, 1, "attn", "hidden_norm"));
    if (name == "autonorm") {
      EXPECT_TRUE(HasDiagValue(events, 1, "attn", "gate_choice"));
    }
    TrainConfig first_half = config;
    first_half.max_iters = 20;
    Losses(first_half, name + "_resumed", false);
    const std::map<int64_t, double> second_half = Losses(config, name + "_resumed", true);
    ASSERT_EQ(second_half.size(), 20u);
    for (const auto& [step, loss] : second_half) {
      EXPECT_EQ(loss, straight.at(step)) << "step " << step;  // bitwise
    }
  }
}

// Issue 11, item 3: evaluation draws from a generator of its own, seeded by (seed, step), so a
// run stopped at step 20 (evaluating there, off the eval_interval grid) and resumed to 40 trains
// exactly as a straight 40-step run, and both report the same val loss at the shared steps.
TEST_F(TrainerTest, EvaluationMovesTheTrainingStreamNoLongerResumeExactWhateverTheEvalSchedule) {
  TrainConfig every_15 = Tiny();
  every_15.eval_interval = 15;
  every_15.checkpoint_interval = 15;
  std::string straight_events, resumed_events;
  const std::map<int64_t, double> straight =
      Losses(every_15, "straight15", false, nullptr, &straight_events);
  ASSERT_EQ(straight.size(), 40u);
  TrainConfig first_half = every_15;
  first_half.max_iters = 20;  // nanoGPT's way: a shorter run of the same 40-step schedule
  Losses(first_half, "resumed15", false);
  const std::map<int64_t, double> second_half =
      Losses(every_15, "resumed15", true, nullptr, &resumed_events);
  ASSERT_EQ(second_half.size(), 20u);
  for (const auto& [step, loss] : second_half) {
    EXPECT_EQ(loss, straight.at(step)) << "step " << step;  // bitwise
  }
  const auto val_at = [](const std::string& events, int64_t step) {
    std::istringstream lines(events);
    for (std::string line; std::getline(lines, line);) {
      const nlohmann::json e = nlohmann::json::parse(line);
      if (e["type"] == "metric" && e["name"] == "val/loss" && e["step"] == step) {
        return e["value"].get<double>();
      }
    }
    return -1.0;
  };
  EXPECT_GT(val_at(straight_events, 30), 0);
  EXPECT_EQ(val_at(resumed_events, 30), val_at(straight_events, 30));
  EXPECT_EQ(val_at(resumed_events, 40), val_at(straight_events, 40));
}

// Concurrent row shards: repeatable bit for bit (also across a resume), and the same training as
// one shard up to float rounding, with even (2 + 2) and uneven (2 + 1 + 1) shards.
TEST_F(TrainerTest, BatchShardsRepeatBitwiseAndTrainLikeOneShard) {
  TrainConfig one = Tiny();
  one.dropout = 0;
  one.batch_shards = 1;
  TrainConfig two = one, three = one;
  two.batch_shards = 2;
  three.batch_shards = 3;
  const auto reference = Losses(one, "one", false);
  const auto straight = Losses(two, "two", false);
  ASSERT_EQ(straight.size(), 40u);
  EXPECT_EQ(Losses(two, "two_again", false), straight);
  TrainConfig first_half = two;
  first_half.max_iters = 20;
  Losses(first_half, "two_resumed", false);
  const auto second_half = Losses(two, "two_resumed", true);
  ASSERT_EQ(second_half.size(), 20u);
  for (const auto& [step, loss] : second_half) EXPECT_EQ(loss, straight.at(step)) << step;
  const auto uneven = Losses(three, "three", false);
  bool any_difference = false;
  for (const auto& [step, loss] : reference) {
    EXPECT_NEAR(straight.at(step), loss, 1e-5 * loss) << "2 shards, step " << step;
    EXPECT_NEAR(uneven.at(step), loss, 1e-5 * loss) << "3 shards, step " << step;
    any_difference |= straight.at(step) != loss;
  }
  // Sums in another order round differently: equal losses would mean no sharding took place.
  EXPECT_TRUE(any_difference);
}

TEST_F(TrainerTest, PSpheretWithPOneTracesProjSpheretExactly) {
  TrainConfig p_one = Tiny(), proj = Tiny();
  p_one.connection.method = Method::kPSpheret;
  p_one.connection.p = 1.0;
  proj.connection.method = Method::kProjSpheret;
  p_one.max_iters = proj.max_iters = 15;
  const auto a = Losses(p_one, "p_one", false), b = Losses(proj, "proj", false);
  ASSERT_EQ(a.size(), 15u);
  EXPECT_EQ(a, b);
}

TEST_F(TrainerTest, RefusesCorruptAndMismatchedCheckpoints) {
  TrainConfig config = Tiny();
  config.max_iters = 10;
  Losses(config, "run", false);
  const std::string ckpt = CheckpointPath((dir_ / "run").string());
  ASSERT_TRUE(fs::exists(ckpt));

  TrainConfig wider = Tiny();
  wider.n_embd = 64;
  ASSERT_EQ(FinalizeConfig(&wider), absl::OkStatus());
  std::ostringstream sink, log;
  EventWriter events(&sink);
  TrainResult mismatched = Train(wider, {(dir_ / "run").string(), true}, &events, &log);
  EXPECT_EQ(mismatched.outcome, TrainOutcome::kError);
  EXPECT_NE(mismatched.status.message().find("n_embd"), std::string::npos) << mismatched.status;

  {  // Flip bytes in the middle of the archive.
    std::fstream file(ckpt, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(static_cast<std::streamoff>(fs::file_size(ckpt) / 2));
    file.write("garbage!garbage!garbage!", 24);
  }
  TrainResult corrupt = Train(Tiny(), {(dir_ / "run").string(), true}, &events, &log);
  EXPECT_EQ(corrupt.outcome, TrainOutcome::kError);
  EXPECT_NE(corrupt.status.message().find("checksum mismatch"), std::string::npos)
      << corrupt.status;
  fs::resize_file(ckpt, 100);  // Truncated.
  corrupt = Train(Tiny(), {(dir_ / "run").string(), true}, &events, &log);
  EXPECT_NE(corrupt.status.message().find("truncated"), std::string::npos) << corrupt.status;
  std::ofstream(ckpt, std::ios::trunc) << "not a checkpoint";
  corrupt = Train(Tiny(), {(dir_ / "run").string(), true}, &events, &log);
  EXPECT_NE(corrupt.status.message().find("not a spheret checkpoint"), std::string::npos)
      << corrupt.status;
}

TEST(OverfitTest, TinyModelMemorizesOneBatch) {
  torch::manual_seed(0);
  nn::GptConfig config;
  config.vocab_size = 32;
  config.block_size = 16;
  config.n_layer = 2;
  config.n_head = 2;
  config.n_embd = 32;
  nn::Gpt model(config);
  torch::optim::AdamW optimizer(model->parameters(), torch::optim::AdamWOptions(3e-3));
  const torch::Tensor x = torch::randint(32, {4, 16}), y = torch::randint(32, {4, 16});
  double loss = 0;
  for (int step = 0; step < 300 && !(loss > 0 && loss < 0.1); ++step) {
    optimizer.zero_grad();
    torch::Tensor l = model->loss(x, y);
    l.backward();
    optimizer.step();
    loss = l.item<double>();
  }
  EXPECT_LT(loss, 0.1);
}

}  // namespace
}  // namespace spheret::train

namespace spheret::train {
namespace {

// The values of metric `name` by step in a run's events.
std::map<int64_t, double> MetricOf(const std::string& events, const std::string& name) {
  std::map<int64_t, double> values;
  std::istringstream lines(events);
  for (std::string line; std::getline(lines, line);) {
    const nlohmann::json event = nlohmann::json::parse(line);
    if (event["type"] == "metric" && event["name"] == name) {
      values[event["step"].get<int64_t>()] = event["value"].get<double>();
    }
  }
  return values;
}

// train/loss_spikes counts the steps whose loss exceeds the mean of the (10 to 200) losses before
// it by spike_margin, recomputed here from the train/loss values; the count survives a resume.
TEST_F(TrainerTest, LossSpikesAreCountedAgainstTheRunningMeanAndSurviveAResume) {
  TrainConfig config = Tiny();
  config.spike_margin = 1e-3;
  config.learning_rate = 1.0;  // far too high, unclipped: the loss jumps above its running mean
  config.grad_clip = 0;
  config.divergence_loss = 1e9;
  std::string events;
  const std::map<int64_t, double> losses = Losses(config, "straight", false, nullptr, &events);
  int64_t expected = 0;
  std::vector<double> before;
  for (const auto& [step, loss] : losses) {
    if (before.size() >= 10) {
      double mean = 0;
      for (double value : before) mean += value;
      expected += loss > mean / static_cast<double>(before.size()) + config.spike_margin;
    }
    before.push_back(loss);
  }
  const std::map<int64_t, double> spikes = MetricOf(events, "train/loss_spikes");
  ASSERT_EQ(spikes.size(), losses.size());
  EXPECT_EQ(spikes.rbegin()->second, static_cast<double>(expected));
  EXPECT_GT(expected, 0) << "the test must see spikes to count them";
  TrainConfig calm = config;
  calm.spike_margin = 100;
  std::string calm_events;
  Losses(calm, "calm", false, nullptr, &calm_events);
  EXPECT_EQ(MetricOf(calm_events, "train/loss_spikes").rbegin()->second, 0);
  TrainConfig first_half = config;
  first_half.max_iters = 20;
  Losses(first_half, "resumed", false);
  std::string resumed_events;
  Losses(config, "resumed", true, nullptr, &resumed_events);
  EXPECT_EQ(MetricOf(resumed_events, "train/loss_spikes").rbegin()->second,
            static_cast<double>(expected));
}

}  // namespace
}  // namespace spheret::train
