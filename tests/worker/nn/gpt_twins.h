// Shared by the fused paths' twin tests (norm_fused_test, attention_fused_test): their fixture, a
// relative difference, and the loss, logits and every parameter's gradient of one batch through a
// tiny GPT, so that a GPT with a fused path can be held against the same GPT without it.
#pragma once

#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "worker/nn/gpt.h"

namespace spheret::nn::twins {

// A twin test's fixture: one intra-op thread (the bit-for-bit tests set two themselves), seed 47.
class OneThreadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    at::set_num_threads(1);
    torch::manual_seed(47);
  }
};

// |a - b| / |b| over the whole tensor (Frobenius norms); 0 when both are zero.
inline double RelDiff(const torch::Tensor& a, const torch::Tensor& b) {
  const double scale = b.to(torch::kDouble).norm().item<double>();
  const double diff = (a.to(torch::kDouble) - b.to(torch::kDouble)).norm().item<double>();
  return scale == 0 ? diff : diff / scale;
}

// A GPT of vocabulary 19, 2 heads of 16, `n_layer` blocks and `block_size` positions.
inline GptConfig TinyGpt(Method method, int64_t n_layer, int64_t block_size) {
  GptConfig config;
  config.vocab_size = 19;
  config.block_size = block_size;
  config.n_layer = n_layer;
  config.n_head = 2;
  config.n_embd = 32;
  config.connection.method = method;
  return config;
}

// The objective's terms, the logits and every parameter's gradient of one batch of 3 full-length
// sequences in `type` (seed 5 for the weights, then the batch: the same for two configs that
// differ only in a fused path).
inline std::vector<torch::Tensor> GptGradients(const GptConfig& config, torch::ScalarType type) {
  torch::manual_seed(5);
  Gpt model(config);
  model->to(type);
  const torch::Tensor idx = torch::randint(19, {3, config.block_size}, torch::kLong);
  const torch::Tensor targets = torch::randint(19, {3, config.block_size}, torch::kLong);
  const torch::Tensor terms = model->objective(idx, targets);
  terms[0].backward();
  std::vector<torch::Tensor> all = {terms.detach(), model->forward(idx).detach()};
  for (const torch::Tensor& p : model->parameters()) all.push_back(p.grad());
  return all;
}

}  // namespace spheret::nn::twins
