// AutoNorm's random-selection baseline, the per-exit readout and the inter-loop norm of looped
// models (docs/methods.md §3), against plain loops written here.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "tests/worker/nn/reference_loops.h"
#include "worker/nn/autonorm.h"
#include "worker/nn/gpt.h"

namespace spheret::nn {
namespace {

constexpr int64_t kC = 6;
using reference::CrossEntropyLoop;
using reference::ExpectNear;
using reference::SublayerLoop;
using reference::Values;
using reference::Vec;

ConnectionOptions AutoNormOptions(AutoNormMode mode) {
  ConnectionOptions options;
  options.method = Method::kAutoNorm;
  options.n_embd = kC;
  options.n_layer = 2;
  options.autonorm_mode = mode;
  return options;
}

// Candidate i of one token x as a loop: LayerNorm (weight w, bias b), RMSNorm (weight w), DyT
// (a, g, b), identity.
Vec CandidateLoop(int i, const Vec& x, const AutoNormConnectionImpl& gate) {
  const int64_t n = static_cast<int64_t>(x.size());
  double mean = 0, var = 0, ms = 0;
  for (double v : x) mean += v / n;
  for (double v : x) var += (v - mean) * (v - mean) / n;
  for (double v : x) ms += v * v / n;
  const auto param = [](const torch::nn::AnyModule& m, const std::string& name) {
    return Values(m.ptr()->named_parameters()[name]);
  };
  Vec y(x);
  for (int64_t j = 0; j < n; ++j) {
    if (i == 0) {
      y[j] = (x[j] - mean) / std::sqrt(var + 1e-5) * param(gate.layernorm, "weight")[j] +
             param(gate.layernorm, "bias")[j];
    } else if (i == 1) {
      y[j] = x[j] / std::sqrt(ms + 1e-5) * param(gate.rmsnorm, "weight")[j];
    } else if (i == 2) {
      y[j] = param(gate.dyt, "g")[j] * std::tanh(param(gate.dyt, "a")[0] * x[j]) +
             param(gate.dyt, "b")[j];
    }
  }
  return y;
}

TEST(AutoNormRandom, HasNoGateParameters) {
  for (AutoNormMode mode : {AutoNormMode::kRandom, AutoNormMode::kRandomFixed}) {
    AutoNormConnectionImpl gate(AutoNormOptions(mode));
    for (const auto& item : gate.named_parameters()) {
      EXPECT_EQ(item.key().find("logits"), std::string::npos) << item.key();
    }
    EXPECT_EQ(gate.named_parameters().size(), 6u);  // LN w, b; RMS w; DyT a, g, b
    EXPECT_TRUE(gate.named_buffers().contains("choice"));
    EXPECT_EQ(gate.choice(), -1);  // nothing picked yet
  }
  AutoNormConnectionImpl learned(AutoNormOptions(AutoNormMode::kLearned));
  EXPECT_TRUE(learned.named_parameters().contains("logits"));
  EXPECT_TRUE(learned.named_buffers().contains("frozen"));
}

TEST(AutoNormRandom, ForwardIsExactlyThePickedCandidate) {
  torch::manual_seed(11);
  auto gate = std::make_shared<AutoNormConnectionImpl>(AutoNormOptions(AutoNormMode::kRandom));
  gate->to(torch::kDouble);
  {
    torch::NoGradGuard no_grad;  // every norm parameter off its init
    for (torch::Tensor& p : gate->parameters()) p.add_(torch::randn_like(p) * 0.2);
  }
  const torch::Tensor w = torch::randn({kC, kC}, torch::kDouble);
  const Sublayer f = [w](const torch::Tensor& x) { return torch::tanh(torch::matmul(x, w.t())); };
  const torch::Tensor h = torch::randn({2, 3, kC}, torch::kDouble) * 2;
  const std::array<torch::nn::AnyModule*, 3> norms = {&gate->layernorm, &gate->rmsnorm, &gate->dyt};
  for (int c = 0; c < AutoNormConnectionImpl::kCandidates; ++c) {
    gate->Pick(c);
    ASSERT_EQ(gate->choice(), c);
    for (bool training : {true, false}) {
      gate->train(training);
      ConnectionDiagnostics d;
      const torch::Tensor out = gate->forward(h, f, &d);
      // Bitwise the candidate's own pre-norm sublayer (the one-hot weight multiplies by 1).
      const torch::Tensor x = c < 3 ? norms[c]->forward(h) : h;
      EXPECT_TRUE(torch::equal(out, h + f(x))) << "candidate " << c;
      // And the plain computation, token by token.
      const Vec hv = Values(h), wv = Values(w), got = Values(out);
      for (int64_t t = 0; t < 6; ++t) {
        const Vec token(hv.begin() + t * kC, hv.begin() + (t + 1) * kC);
        const Vec fx = SublayerLoop(CandidateLoop(c, token, *gate), wv);
        Vec want(kC);
        for (int64_t j = 0; j < kC; ++j) want[j] = token[j] + fx[j];
        ExpectNear(Vec(got.begin() + t * kC, got.begin() + (t + 1) * kC), want, 1e-12,
                   "candidate " + std::to_string(c));
      }
      EXPECT_EQ(d.extra[0].first, "gate_choice");
      EXPECT_EQ(d.extra[0].second, c);
      EXPECT_EQ(d.extra[1].second, 0.25);  // a uniform draw's top probability
    }
    // Only the picked candidate is computed, so only its parameters get a gradient.
    gate->zero_grad();
    gate->forward(h.clone().requires_grad_(true), f).sum().backward();
    const int with_grad = gate->layernorm.ptr()->parameters()[0].grad().defined() +
                          gate->rmsnorm.ptr()->parameters()[0].grad().defined() +
                          gate->dyt.ptr()->parameters()[0].grad().defined();
    EXPECT_EQ(with_grad, c < 3 ? 1 : 0) << "candidate " << c;
  }
}

TEST(AutoNormRandom, BeforeAnyPickTheGateIsTheUniformMixture) {
  auto gate = std::make_shared<AutoNormConnectionImpl>(AutoNormOptions(AutoNormMode::kRandomFixed));
  gate->to(torch::kDouble);
  const torch::Tensor h = torch::randn({1, 2, kC}, torch::kDouble);
  const Sublayer f = [](const torch::Tensor& x) { return x * 0.5; };
  torch::Tensor mixture = torch::zeros_like(h);
  for (torch::nn::AnyModule* norm : {&gate->layernorm, &gate->rmsnorm, &gate->dyt}) {
    mixture = mixture + 0.25 * norm->forward(h);
  }
  mixture = mixture + 0.25 * h;
  EXPECT_LT((gate->forward(h, f) - (h + 0.5 * mixture)).abs().max().item<double>(), 1e-14);
}

// Pearson's chi-square of `counts` against a uniform distribution.
double ChiSquare(const std::array<int64_t, 4>& counts) {
  double total = 0, chi = 0;
  for (int64_t c : counts) total += static_cast<double>(c);
  for (int64_t c : counts) chi += std::pow(static_cast<double>(c) - total / 4, 2) / (total / 4);
  return chi;
}

TEST(AutoNormRandom, DrawsAreUniformAndAFunctionOfTheSeed) {
  std::array<int64_t, 4> counts{};
  for (uint64_t seed = 0; seed < 500; ++seed) {
    const torch::Tensor draw = DrawGateChoices(seed * 0x9E3779B97F4A7C15ull, 8);  // (8)
    ASSERT_EQ(draw.size(0), 8);
    EXPECT_TRUE(torch::equal(draw, DrawGateChoices(seed * 0x9E3779B97F4A7C15ull, 8)));
    for (double c : Values(draw)) ++counts.at(static_cast<size_t>(c));
  }
  // 4000 draws: chi-square with 3 degrees of freedom stays below 16.27 with probability 0.999;
  // a constant choice gives 12000.
  EXPECT_LT(ChiSquare(counts), 16.27)
      << counts[0] << " " << counts[1] << " " << counts[2] << " " << counts[3];
  EXPECT_GT(ChiSquare({4000, 0, 0, 0}), 16.27);
  EXPECT_FALSE(torch::equal(DrawGateChoices(1, 16), DrawGateChoices(2, 16)));
}

GptConfig TinyLooped(Method method, InterLoopNorm norm) {
  GptConfig config;
  config.vocab_size = 11;
  config.block_size = 6;
  config.n_layer = 1;
  config.n_head = 2;
  config.n_embd = 8;
  config.loops = 3;
  config.inter_loop_norm = norm;
  config.connection.method = method;
  config.connection.decay = Decay::kNone;  // lambda_l is the block's index within the stack
  return config;
}

// The inter-loop norm of one (1, T, C) state as loops over its tokens; h0 the stack's input.
torch::Tensor InterLoopLoop(InterLoopNorm norm, const torch::Tensor& h, const torch::Tensor& h0,
                            const Vec& weight, const Vec& bias) {
  const int64_t t_len = h.size(1), c = h.size(2);
  const Vec hv = Values(h), h0v = Values(h0);
  Vec out(hv.size());
  for (int64_t t = 0; t < t_len; ++t) {
    double mean = 0, var = 0, ms = 0, norm_h = 0, norm_h0 = 0;
    for (int64_t j = 0; j < c; ++j) {
      const double v = hv[t * c + j];
      mean += v / c;
      ms += v * v / c;
      norm_h += v * v;
      norm_h0 += h0v[t * c + j] * h0v[t * c + j];
    }
    for (int64_t j = 0; j < c; ++j) var += std::pow(hv[t * c + j] - mean, 2) / c;
    for (int64_t j = 0; j < c; ++j) {
      const double v = hv[t * c + j];
      switch (norm) {
        case InterLoopNorm::kNone:
          out[t * c + j] = v;
          break;
        case InterLoopNorm::kLayerNorm:
          out[t * c + j] = (v - mean) / std::sqrt(var + 1e-5) * weight[j] + bias[j];
          break;
        case InterLoopNorm::kRmsNorm:
          out[t * c + j] = v / std::sqrt(ms + 1e-5) * weight[j];
          break;
        case InterLoopNorm::kSphere:
          out[t * c + j] = v * std::sqrt(norm_h0) / std::sqrt(norm_h);
          break;
      }
    }
  }
  return torch::tensor(out, torch::kDouble).view(h.sizes());
}

// The looped model (one block, three loops, the norm between loops) against unrolled tied
// copies: a three-block model holding the looped block's weights, run block by block with the
// norm applied in between by InterLoopLoop; logits and every exit's loss.
void ExpectLoopedEqualsUnrolledWithNorm(Method method, InterLoopNorm norm) {
  SCOPED_TRACE(std::string(MethodId(method)) + " " + std::string(KnobId(norm)));
  torch::manual_seed(12);
  Gpt looped(TinyLooped(method, norm));
  GptConfig unrolled_config = TinyLooped(method, InterLoopNorm::kNone);
  unrolled_config.n_layer = 3;
  unrolled_config.loops = 1;
  Gpt unrolled(unrolled_config);
  looped->to(torch::kDouble);
  unrolled->to(torch::kDouble);
  Vec weight(8, 1.0), bias(8, 0.0);
  {
    torch::NoGradGuard no_grad;
    auto source = looped->named_parameters();
    if (source.contains("loop_norm.weight")) {  // off its init, so the test sees which it uses
      source["loop_norm.weight"].uniform_(0.5, 1.5);
      weight = Values(source["loop_norm.weight"]);
      if (source.contains("loop_norm.bias")) {
        source["loop_norm.bias"].uniform_(-0.3, 0.3);
        bias = Values(source["loop_norm.bias"]);
      }
    }
    for (auto& item : unrolled->named_parameters()) {
      std::string key = item.key();
      if (key.rfind("blocks.", 0) == 0) key = "blocks.0" + key.substr(key.find('.', 7));
      item.value().copy_(source[key]);
    }
  }
  looped->eval();
  unrolled->eval();
  const torch::Tensor idx = torch::tensor({{2, 5, 9, 1}}, torch::kLong);
  const std::vector<int64_t> targets = {5, 9, 1, 3};
  torch::NoGradGuard no_grad;
  torch::Tensor h =
      unrolled->embedding_norm.forward(unrolled->wte(idx) + unrolled->wpe(torch::arange(4)));
  const torch::Tensor h0 = h;
  std::vector<double> exits;
  for (int64_t b = 0; b < 3; ++b) {
    if (b > 0) h = InterLoopLoop(norm, h, h0, weight, bias);
    h = unrolled->block_at(b).forward(h, nullptr);
    exits.push_back(CrossEntropyLoop(unrolled->head(h), targets));
  }
  const torch::Tensor logits = looped->forward(idx);
  EXPECT_LT((logits - unrolled->head(h)).abs().max().item<double>(), 1e-10);
  const torch::Tensor target_tensor = torch::tensor(targets, torch::kLong).view({1, -1});
  const Vec got = Values(looped->exit_losses(idx, target_tensor));
  ExpectNear(got, exits, 1e-10, "exit losses");
  EXPECT_EQ(got.back(), looped->loss(idx, target_tensor).item<double>());  // the last is loss()
}

TEST(InterLoopNorm, LoopedForwardEqualsUnrolledCopiesWithTheNormInBetween) {
  for (InterLoopNorm norm : {InterLoopNorm::kNone, InterLoopNorm::kLayerNorm,
                             InterLoopNorm::kRmsNorm, InterLoopNorm::kSphere}) {
    ExpectLoopedEqualsUnrolledWithNorm(Method::kPreLn, norm);
  }
  ExpectLoopedEqualsUnrolledWithNorm(Method::kGeoNorm, InterLoopNorm::kLayerNorm);
  ExpectLoopedEqualsUnrolledWithNorm(Method::kPreDyt, InterLoopNorm::kSphere);
}

TEST(InterLoopNorm, SphereProjectsEachLoopsInputToTheRadiusOfTheStacksInput) {
  torch::manual_seed(13);
  Gpt looped(TinyLooped(Method::kPreLn, InterLoopNorm::kSphere));
  Gpt plain(TinyLooped(Method::kPreLn, InterLoopNorm::kNone));
  EXPECT_EQ(looped->parameters().size(), plain->parameters().size());  // no parameters
  looped->to(torch::kDouble);
  ForwardRecord record;
  record.keep_block_inputs = true;
  const torch::Tensor idx = torch::tensor({{3, 1, 4, 1, 5}}, torch::kLong);
  looped->hidden(idx, &record);
  ASSERT_EQ(record.block_inputs.size(), 3u);
  const torch::Tensor r0 = record.embedded.norm(2, -1);  // (1, T)
  for (int k = 1; k < 3; ++k) {
    const torch::Tensor r = record.block_inputs[k].norm(2, -1);
    EXPECT_LT((r - r0).abs().max().item<double>(), 1e-12) << "loop " << k + 1;
    // ... while the loop outputs themselves have left that radius (pre-norm growth).
    EXPECT_GT((record.loop_states[k - 1].norm(2, -1) - r0).abs().max().item<double>(), 1e-3);
  }
}

TEST(InterLoopNorm, OneSharedModuleAndOnlyForLoopedModels) {
  Gpt layernorm(TinyLooped(Method::kPreLn, InterLoopNorm::kLayerNorm));
  int loop_norm_parameters = 0;
  for (const auto& item : layernorm->named_parameters()) {
    loop_norm_parameters += item.key().rfind("loop_norm.", 0) == 0;
  }
  EXPECT_EQ(loop_norm_parameters, 2);  // weight and bias, one module for both boundaries
  GptConfig unlooped = TinyLooped(Method::kPreLn, InterLoopNorm::kRmsNorm);
  unlooped.loops = 1;
  EXPECT_EQ(ValidateGptConfig(&unlooped).message(), "inter_loop_norm needs loops >= 2");
}

}  // namespace
}  // namespace spheret::nn
