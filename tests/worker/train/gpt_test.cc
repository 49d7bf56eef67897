#include "worker/nn/gpt.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

namespace spheret::nn {
namespace {

GptConfig Small(const char* method) {
  GptConfig config;
  config.vocab_size = 64;
  config.block_size = 16;
  config.n_layer = 3;
  config.n_head = 2;
  config.n_embd = 32;
  config.connection.method = *ParseMethod(method);
  return config;
}

TEST(GptTest, EveryMethodGivesLogitsAndAFiniteLoss) {
  for (const char* method : {"pre_ln", "post_ln", "pre_dyt", "peri_ln", "keel", "geonorm",
                             "proj_spheret", "cay_spheret", "p_spheret"}) {
    torch::manual_seed(0);
    Gpt model(Small(method));
    const torch::Tensor idx = torch::randint(64, {2, 16});
    EXPECT_EQ(model->forward(idx).sizes(), (std::vector<int64_t>{2, 16, 64})) << method;
    const torch::Tensor loss = model->loss(idx, torch::randint(64, {2, 16}));
    EXPECT_TRUE(std::isfinite(loss.item<double>())) << method;
    // At init the logits are small, so the loss is near ln(vocab).
    EXPECT_NEAR(loss.item<double>(), std::log(64.0), 0.5) << method;
  }
}

// The SpheretNorm types start on the ScaleNorm radius sqrt(C) (at init) and keep it; geonorm has
// no ScaleNorm (Eq. 3) and keeps the embedding's own norm, ||wte + wpe|| per token.
TEST(GptTest, SphereMethodsKeepTheHiddenNorm) {
  for (const char* method : {"geonorm", "proj_spheret", "cay_spheret", "p_spheret"}) {
    Gpt model(Small(method));
    std::vector<ConnectionDiagnostics> diagnostics;
    torch::NoGradGuard no_grad;
    const torch::Tensor idx = torch::randint(64, {2, 16});
    model->forward(idx, &diagnostics);
    ASSERT_EQ(diagnostics.size(), 6u);
    const torch::Tensor embedded = model->wte(idx) + model->wpe(torch::arange(16));
    const bool geonorm = std::string(method) == "geonorm";
    const double radius = geonorm ? embedded.norm(2, -1).mean().item<double>() : std::sqrt(32.0);
    if (geonorm) {
      EXPECT_LT(radius, 1.0) << "the embedding's norm at init is far from sqrt(C)";
    }
    for (const ConnectionDiagnostics& d : diagnostics) {
      EXPECT_NEAR(d.hidden_norm, radius, 1e-4) << method;
    }
  }
}

TEST(GptTest, HeadIsTiedAndPresetSizeMatchesGpt2Small) {
  GptConfig config;  // S: 12 layers, 12 heads, 768 wide, vocab 50304, block 1024.
  Gpt model(config);
  for (const auto& item : model->named_parameters()) {
    EXPECT_EQ(item.key().find("lm_head"), std::string::npos);
  }
  const int64_t c = 768, v = 50304, l = 12;
  const int64_t per_block =
      2 * 2 * c + (c * 3 * c + 3 * c) + (c * c + c) + (c * 4 * c + 4 * c) + (4 * c * c + c);
  EXPECT_EQ(model->num_parameters(), v * c + l * per_block + 2 * c);  // 123.69M, as nanoGPT prints
  EXPECT_NEAR(model->num_parameters() / 1e6, 123.69, 0.01);
}

TEST(GptTest, RefusesInvalidConfig) {
  GptConfig config = Small("pre_ln");
  config.n_head = 5;
  EXPECT_THROW(Gpt{config}, std::invalid_argument);
  EXPECT_NE(ValidateGptConfig(&config).message().find("n_head"), std::string::npos);
  EXPECT_TRUE(FindScalePreset("d12-cpu").has_value());
  EXPECT_EQ(FindScalePreset("d12-cpu")->n_layer, 12);
  EXPECT_FALSE(FindScalePreset("XL").has_value());
}

}  // namespace
}  // namespace spheret::nn
