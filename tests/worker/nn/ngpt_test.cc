// nGPT as published (worker/nn/ngpt.h) and rotary attention for every method, each equation
// against the plain loops of reference_loops.h, in double precision.
#include "worker/nn/ngpt.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "tests/worker/nn/reference_loops.h"
#include "worker/nn/gpt.h"

namespace spheret::nn {
namespace {

using reference::AttentionLoop;
using reference::Dot;
using reference::ExpectNear;
using reference::Mat;
using reference::MatVec;
using reference::Normalized;
using reference::Rows;
using reference::SwiGluLoop;
using reference::Values;
using reference::Vec;

// The paper's effective/stored ratios (init / scale), written out independently of ngpt.cc.
double AlphaFactor(int64_t c) { return 0.05 * std::sqrt(double(c)); }
double QkFactor(int64_t c) { return std::sqrt(double(c)); }
double LogitFactor(int64_t c) { return std::sqrt(double(c)); }

constexpr int64_t kV = 11, kC = 8, kHeads = 2;

GptConfig NgptConfig(int64_t n_layer = 2) {
  GptConfig config;
  config.vocab_size = kV;
  config.block_size = 6;
  config.n_layer = n_layer;
  config.n_head = kHeads;
  config.n_embd = kC;
  config.bias = false;
  config.pos_encoding = PosEncoding::kRope;
  config.connection.method = Method::kNgpt;
  return config;
}

// Moves every 1-D parameter (alpha, s_qk, s_u, s_nu, s_z) off its init, so each scaling is seen.
void PerturbVectors(Gpt& model) {
  torch::NoGradGuard no_grad;
  for (torch::Tensor& p : model->parameters()) {
    if (p.dim() == 1) p.mul_(torch::rand_like(p) + 0.5);
  }
}

// Attention of one block on x (1, T, C) against AttentionLoop.
void ExpectAttentionMatchesLoop(GptConfig config, bool ngpt) {
  torch::manual_seed(3);
  Gpt model(config);
  model->to(torch::kDouble);
  PerturbVectors(model);
  CausalSelfAttentionImpl& attn = *model->block_at(0).attn;
  const torch::Tensor x = torch::randn({1, 5, kC}, torch::kDouble);
  Vec s_qk;
  if (ngpt) {
    for (double s : Values(attn.s_qk)) s_qk.push_back(s * QkFactor(kC));
    ExpectNear(Values(attn.s_qk_effective()), s_qk, 1e-13, "s_qk");
  }
  const Mat want =
      AttentionLoop(Rows(x[0]), Rows(attn.c_attn->weight), Rows(attn.c_proj->weight), kHeads,
                    config.pos_encoding == PosEncoding::kRope, ngpt ? &s_qk : nullptr);
  const torch::Tensor got = attn.forward(x)[0];
  for (int64_t t = 0; t < 5; ++t) ExpectNear(Values(got[t]), want[t], 1e-12, "attention");
  const CompositeModeGuard composite;  // the math kernel gets the same scale
  const torch::Tensor math = attn.forward(x)[0];
  for (int64_t t = 0; t < 5; ++t) ExpectNear(Values(math[t]), want[t], 1e-12, "math kernel");
}

TEST(NgptAttention, NormalizedScaledQueriesAndKeysWithSqrtDkSoftmaxScale) {
  ExpectAttentionMatchesLoop(NgptConfig(), /*ngpt=*/true);
  GptConfig learned = NgptConfig();
  learned.pos_encoding = PosEncoding::kLearned;  // the same without the rotation
  ExpectAttentionMatchesLoop(learned, /*ngpt=*/true);
}

TEST(RopeAttention, EveryMethodCanRotateQueriesAndKeys) {
  for (Method method : {Method::kPreLn, Method::kProjSpheret, Method::kAutoNorm}) {
    GptConfig config = NgptConfig();
    config.connection.method = method;
    config.bias = false;  // the loop has no biases; rope and bias are independent knobs
    SCOPED_TRACE(std::string(MethodId(method)));
    ExpectAttentionMatchesLoop(config, /*ngpt=*/false);
    Gpt model(config);
    for (const auto& item : model->named_parameters()) EXPECT_NE(item.key(), "wpe.weight");
    EXPECT_FALSE(model->wpe);
  }
}

TEST(NgptMlp, SwiGluWithScaledUAndNu) {
  torch::manual_seed(4);
  Gpt model(NgptConfig());
  model->to(torch::kDouble);
  PerturbVectors(model);
  MlpImpl& mlp = *model->block_at(1).mlp;
  ASSERT_EQ(mlp.c_fc->weight.sizes(), (std::vector<int64_t>{8 * kC, kC}));  // u, nu: 4C each
  ASSERT_EQ(mlp.c_proj->weight.sizes(), (std::vector<int64_t>{kC, 4 * kC}));
  const torch::Tensor x = torch::randn({1, 3, kC}, torch::kDouble);
  // s_u and s_nu are stored at init 1 with scale 1: the effective value is the stored one.
  const Mat want = SwiGluLoop(Rows(x[0]), Rows(mlp.c_fc->weight), Rows(mlp.c_proj->weight),
                              Values(mlp.s_u), Values(mlp.s_nu));
  const torch::Tensor got = mlp.forward(x)[0];
  for (int64_t t = 0; t < 3; ++t) ExpectNear(Values(got[t]), want[t], 1e-12, "swiglu");
}

TEST(NgptGpt, ForwardMatchesTheWholeModelAsLoops) {
  torch::manual_seed(5);
  Gpt model(NgptConfig(2));
  model->to(torch::kDouble);
  PerturbVectors(model);
  model->eval();
  const std::vector<int64_t> idx = {3, 1, 9, 4};
  const torch::Tensor logits = model->forward(torch::tensor(idx).view({1, -1}))[0];  // (T, V)

  Mat h;
  const Mat wte = Rows(model->wte->weight);
  for (int64_t token : idx) h.push_back(Normalized(wte[token]));  // unit; no wpe with rope
  auto update = [&](const Mat& f, const torch::Tensor& alpha) {   // h <- n(h + |a| (n(f) - h))
    const Vec a = Values(alpha);
    for (size_t t = 0; t < h.size(); ++t) {
      const Vec nf = Normalized(f[t]);
      for (int64_t i = 0; i < kC; ++i)
        h[t][i] += std::abs(a[i] * AlphaFactor(kC)) * (nf[i] - h[t][i]);
      h[t] = Normalized(h[t]);
    }
  };
  for (int64_t b = 0; b < 2; ++b) {
    BlockImpl& block = model->block_at(b);
    Vec s_qk;
    for (double s : Values(block.attn->s_qk)) s_qk.push_back(s * QkFactor(kC));
    update(AttentionLoop(h, Rows(block.attn->c_attn->weight), Rows(block.attn->c_proj->weight),
                         kHeads, true, &s_qk),
           block.conn_attn->as<NgptConnectionImpl>()->alpha);
    update(SwiGluLoop(h, Rows(block.mlp->c_fc->weight), Rows(block.mlp->c_proj->weight),
                      Values(block.mlp->s_u), Values(block.mlp->s_nu)),
           block.conn_mlp->as<NgptConnectionImpl>()->alpha);
  }
  const Mat e_output = Rows(model->lm_head->weight);
  const Vec s_z = Values(model->s_z);
  for (size_t t = 0; t < idx.size(); ++t) {
    Vec want(kV);
    for (int64_t v = 0; v < kV; ++v) want[v] = s_z[v] * LogitFactor(kC) * Dot(e_output[v], h[t]);
    ExpectNear(Values(logits[t]), want, 1e-11, "logits");
  }
}

TEST(NgptGpt, UntiedHeadNoBiasesNoWpe) {
  torch::manual_seed(6);
  Gpt model(NgptConfig());
  model->to(torch::kDouble);
  ASSERT_TRUE(model->lm_head);
  EXPECT_FALSE(model->lm_head->bias.defined());
  EXPECT_FALSE(model->wpe);
  for (const auto& item : model->named_parameters()) {
    const std::string& name = item.key();
    EXPECT_EQ(name.find("bias"), std::string::npos) << name;
    EXPECT_NE(name, "wpe.weight");
  }
  EXPECT_GT((model->lm_head->weight - model->wte->weight).abs().max().item<double>(), 0.1);
  // The head reads E_output only: moving wte changes nothing for a given hidden state.
  const torch::Tensor h = UnitNormalize(torch::randn({1, 2, kC}, torch::kDouble));
  const torch::Tensor before = model->head(h).detach();
  {
    torch::NoGradGuard no_grad;
    model->wte->weight.mul_(-1);
  }
  EXPECT_EQ((model->head(h) - before).abs().max().item<double>(), 0.0);
  // nGPT has no biases: a GptConfig asking for them is refused, as is rope with an odd head size.
  GptConfig biased = NgptConfig();
  biased.bias = true;
  EXPECT_NE(ValidateGptConfig(&biased).message().find("bias must be false for method ngpt"),
            std::string::npos);
  EXPECT_THROW(Gpt{biased}, std::invalid_argument);
  GptConfig odd = NgptConfig();
  odd.n_embd = 6;  // head size 3
  EXPECT_NE(ValidateGptConfig(&odd).message().find("even head size"), std::string::npos);
  // Non-embedding parameters leave out E_input (the head is untied) and wpe (none here).
  int64_t all = 0;
  for (const torch::Tensor& p : model->parameters()) all += p.numel();
  EXPECT_EQ(model->num_parameters(false), all);
  EXPECT_EQ(model->num_parameters(), all - kV * kC);
}

TEST(NgptGpt, ScalingsStartAtThePapersValues) {
  const int64_t c = 16;
  GptConfig config = NgptConfig();
  config.n_embd = c;
  Gpt model(config);
  auto expect_all = [](const torch::Tensor& t, double value, const std::string& what) {
    const Vec v = Values(t);
    ASSERT_FALSE(v.empty()) << what;
    for (double x : v) EXPECT_NEAR(x, value, 1e-7) << what;
  };
  for (int64_t b = 0; b < 2; ++b) {
    BlockImpl& block = model->block_at(b);
    for (const Connection& connection : {block.conn_attn, block.conn_mlp}) {
      auto* ngpt = connection->as<NgptConnectionImpl>();
      ASSERT_NE(ngpt, nullptr);
      expect_all(ngpt->alpha, 1.0 / std::sqrt(double(c)), "alpha stored");  // 1/sqrt(C)
      expect_all(ngpt->step(), 0.05, "alpha effective");
    }
    expect_all(block.attn->s_qk, 1.0 / std::sqrt(double(c)), "s_qk stored");
    expect_all(block.attn->s_qk_effective(), 1.0, "s_qk effective");
    EXPECT_EQ(block.attn->s_qk.numel(), c);  // per head, per dimension
    expect_all(block.mlp->s_u, 1.0, "s_u stored = effective");
    expect_all(block.mlp->s_nu, 1.0, "s_nu stored = effective");
    EXPECT_EQ(block.mlp->s_u.numel(), 4 * c);
  }
  expect_all(model->s_z, 1.0 / std::sqrt(double(c)), "s_z stored");
  // Effective s_z = 1: the logits are E_output h at init.
  const torch::Tensor h = UnitNormalize(torch::randn({1, 1, c}));
  ExpectNear(Values(model->head(h)), Values(torch::linear(h, model->lm_head->weight)), 1e-6,
             "s_z effective");
  // Every scaling is a vector, so the optimizer's dim >= 2 rule never decays it.
  for (const auto& item : model->named_parameters()) {
    const std::string& name = item.key();
    if (name.find("alpha") != std::string::npos || name.find("s_") != std::string::npos) {
      EXPECT_EQ(item.value().dim(), 1) << name;
    }
  }
}

// Each matrix's lines along the embedding dimension (rows: dim 1, columns: dim 0) have unit norm.
void ExpectUnitLines(const torch::Tensor& m, int dim, const std::string& name) {
  const Mat rows = Rows(m.to(torch::kDouble));
  const size_t lines = dim == 1 ? rows.size() : rows[0].size();
  for (size_t line = 0; line < lines; ++line) {
    double s = 0;
    for (size_t k = 0; k < (dim == 1 ? rows[0].size() : rows.size()); ++k) {
      const double v = dim == 1 ? rows[line][k] : rows[k][line];
      s += v * v;
    }
    EXPECT_NEAR(std::sqrt(s), 1.0, 1e-6) << name << " line " << line;
  }
}

TEST(NgptGpt, EveryMatrixIsNormalizedAlongTheEmbeddingDimensionAfterAStep) {
  for (PosEncoding pos : {PosEncoding::kRope, PosEncoding::kLearned}) {
    torch::manual_seed(7);
    GptConfig config = NgptConfig();
    config.pos_encoding = pos;
    Gpt model(config);
    {
      torch::NoGradGuard no_grad;  // an "optimizer step" that breaks every norm
      for (torch::Tensor& p : model->parameters()) p.add_(torch::randn_like(p) * 0.3);
    }
    std::vector<Vec> vectors_moved;
    for (const torch::Tensor& p : model->parameters()) {
      if (p.dim() == 1) vectors_moved.push_back(Values(p));
    }
    model->NormalizeWeights();
    const std::set<std::string> rows = {"wte", "wpe", "lm_head", "c_attn", "c_fc"};
    std::set<std::string> seen;
    for (const auto& item : model->named_parameters()) {
      if (item.value().dim() != 2) continue;
      std::string name = item.key().substr(0, item.key().size() - 7);  // less ".weight"
      name = name.substr(name.rfind('.') + 1);
      seen.insert(name);
      if (rows.count(name) != 0) {
        ExpectUnitLines(item.value(), 1, item.key());
      } else if (name == "c_proj") {
        ExpectUnitLines(item.value(), 0, item.key());
      } else {
        ADD_FAILURE() << "a matrix nGPT does not normalize: " << item.key();
      }
    }
    std::set<std::string> want = {"wte", "lm_head", "c_attn", "c_fc", "c_proj"};
    if (pos == PosEncoding::kLearned) want.insert("wpe");
    EXPECT_EQ(seen, want);
    size_t i = 0;  // the scalings are left as the step put them
    for (const torch::Tensor& p : model->parameters()) {
      if (p.dim() == 1) ExpectNear(Values(p), vectors_moved[i++], 0, "vector");
    }
  }
}

}  // namespace
}  // namespace spheret::nn
