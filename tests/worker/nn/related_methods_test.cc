// nGPT, AutoNorm and the looped GPT (docs/methods.md §3) against plain loops written here.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/worker/nn/reference_loops.h"
#include "worker/nn/autonorm.h"
#include "worker/nn/gpt.h"
#include "worker/nn/ngpt.h"

namespace spheret::nn {
namespace {

constexpr int64_t kC = 5;
using reference::CrossEntropyLoop;
using reference::SublayerLoop;
using reference::Values;
using reference::Vec;

double Norm(const Vec& x) {
  double s = 0;
  for (double v : x) s += v * v;
  return std::sqrt(s);
}

Vec Scaled(const Vec& x, double k) {
  Vec y(x);
  for (double& v : y) v *= k;
  return y;
}

Sublayer TorchSublayer(const torch::Tensor& w) {
  return [w](const torch::Tensor& x) { return torch::tanh(torch::matmul(x, w.t())); };
}

void ExpectNear(const Vec& got, const Vec& want, double tolerance) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tolerance) << "at " << i;
}

ConnectionOptions Options(Method method) {
  ConnectionOptions options;
  options.method = method;
  options.n_embd = kC;
  options.n_layer = 2;
  return options;
}

TEST(Ngpt, UpdateMatchesLoop) {
  torch::manual_seed(1);
  auto connection = std::make_shared<NgptConnectionImpl>(Options(Method::kNgpt));
  connection->to(torch::kDouble);
  {
    torch::NoGradGuard no_grad;  // alpha off its init, one entry negative (|alpha| is used)
    connection->alpha.copy_(torch::tensor({0.3, -0.1, 0.25, 0.6, 0.05}, torch::kDouble));
  }
  const torch::Tensor w = torch::randn({kC, kC}, torch::kDouble);
  torch::Tensor h = torch::randn({1, 1, kC}, torch::kDouble);
  h = h / h.norm();
  const torch::Tensor out = connection->forward(h, TorchSublayer(w));

  const Vec hv = Values(h), alpha = Values(connection->alpha), wv = Values(w);
  const double scale = 0.05 * std::sqrt(static_cast<double>(kC));
  const Vec f = SublayerLoop(hv, wv);  // F sees h itself
  const double nf = Norm(f);
  Vec y(kC);
  for (int64_t i = 0; i < kC; ++i) y[i] = hv[i] + std::abs(alpha[i] * scale) * (f[i] / nf - hv[i]);
  ExpectNear(Values(out), Scaled(y, 1.0 / Norm(y)), 1e-12);
  EXPECT_NEAR(Norm(Values(out)), 1.0, 1e-12);
}

TEST(Ngpt, AlphaStartsAtInitThroughItsScaling) {
  ConnectionOptions options = Options(Method::kNgpt);
  options.ngpt_alpha_init = 0.07;
  auto connection = std::make_shared<NgptConnectionImpl>(options);
  ExpectNear(Values(connection->alpha), Vec(kC, 1.0 / std::sqrt(5.0)), 1e-7);
  ExpectNear(Values(connection->step()), Vec(kC, 0.07), 1e-7);
}

GptConfig TinyGpt(Method method) {
  GptConfig config;
  config.vocab_size = 11;
  config.block_size = 6;
  config.n_layer = 2;
  config.n_head = 2;
  config.n_embd = 8;
  config.connection.method = method;
  if (method == Method::kNgpt) {  // nGPT as published: no biases, rotary positions
    config.bias = false;
    config.pos_encoding = PosEncoding::kRope;
  }
  return config;
}

// Each row (dim 1) or column (dim 0) of `m` has unit norm, checked with loops.
void ExpectUnitLines(const torch::Tensor& m, int dim, const std::string& name) {
  const torch::Tensor d = m.detach().to(torch::kDouble).contiguous();
  const int64_t rows = d.size(0), cols = d.size(1);
  const double* p = d.data_ptr<double>();
  for (int64_t line = 0; line < (dim == 1 ? rows : cols); ++line) {
    double s = 0;
    for (int64_t k = 0; k < (dim == 1 ? cols : rows); ++k) {
      const double v = dim == 1 ? p[line * cols + k] : p[k * cols + line];
      s += v * v;
    }
    EXPECT_NEAR(std::sqrt(s), 1.0, 1e-6) << name << " line " << line;
  }
}

// nGPT has no biases now; the vectors a step moves (here s_qk) are what must stay untouched.
// tests/worker/nn/ngpt_test.cc checks every matrix by name, with and without wpe.
TEST(Ngpt, WeightNormalizationAfterAStep) {
  torch::manual_seed(2);
  GptConfig config = TinyGpt(Method::kNgpt);
  config.pos_encoding = PosEncoding::kLearned;  // with wpe, to normalize it too
  Gpt model(config);
  const Vec s_qk_before = Values(model->block_at(0).attn->s_qk);
  {
    torch::NoGradGuard no_grad;  // an "optimizer step" that breaks every norm
    for (torch::Tensor& p : model->parameters()) p.add_(torch::randn_like(p) * 0.3);
  }
  const Vec s_qk_moved = Values(model->block_at(0).attn->s_qk);
  model->NormalizeWeights();
  ExpectUnitLines(model->wte->weight, 1, "wte");
  ExpectUnitLines(model->wpe->weight, 1, "wpe");
  ExpectUnitLines(model->lm_head->weight, 1, "lm_head");
  for (int64_t b = 0; b < 2; ++b) {
    ExpectUnitLines(model->block_at(b).attn->c_attn->weight, 1, "c_attn");
    ExpectUnitLines(model->block_at(b).mlp->c_fc->weight, 1, "c_fc");
    ExpectUnitLines(model->block_at(b).attn->c_proj->weight, 0, "attn.c_proj");
    ExpectUnitLines(model->block_at(b).mlp->c_proj->weight, 0, "mlp.c_proj");
  }
  ExpectNear(Values(model->block_at(0).attn->s_qk), s_qk_moved, 0);  // vectors untouched
  EXPECT_NE(s_qk_moved, s_qk_before);
}

// The head is nGPT's untied E_output (lm_head), no longer wte.
TEST(Ngpt, UnitEmbeddingNoFinalNormAndScaledLogits) {
  torch::manual_seed(3);
  Gpt model(TinyGpt(Method::kNgpt));
  model->to(torch::kDouble);
  {
    torch::NoGradGuard no_grad;
    model->s_z.uniform_(0.1, 0.9);
  }
  const torch::Tensor idx = torch::tensor({{1, 4, 7}}, torch::kLong);
  ForwardRecord record;
  const torch::Tensor h = model->hidden(idx, &record);
  for (int64_t t = 0; t < 3; ++t) {
    EXPECT_NEAR(Norm(Values(record.embedded[0][t])), 1.0, 1e-12);
    EXPECT_NEAR(Norm(Values(h[0][t])), 1.0, 1e-12);
  }
  const Vec hv = Values(h[0][2]), head = Values(model->lm_head->weight), sz = Values(model->s_z);
  const Vec logits = Values(model->head(h)[0][2]);
  for (int64_t v = 0; v < 11; ++v) {
    double dot = 0;
    for (int64_t c = 0; c < 8; ++c) dot += hv[c] * head[v * 8 + c];
    EXPECT_NEAR(logits[v], sz[v] * std::sqrt(8.0) * dot, 1e-12) << "token " << v;
  }
}

// The four candidates of AutoNorm for one token, as loops (weights at init: LN and RMS weight 1,
// bias 0; DyT a = 0.5, g = 1, b = 0).
std::vector<Vec> Candidates(const Vec& x) {
  double mean = 0, var = 0, ms = 0;
  for (double v : x) mean += v / kC;
  for (double v : x) var += (v - mean) * (v - mean) / kC;
  for (double v : x) ms += v * v / kC;
  Vec ln(kC), rms(kC), dyt(kC);
  for (int64_t i = 0; i < kC; ++i) {
    ln[i] = (x[i] - mean) / std::sqrt(var + 1e-5);
    rms[i] = x[i] / std::sqrt(ms + 1e-5);
    dyt[i] = std::tanh(0.5 * x[i]);
  }
  return {ln, rms, dyt, x};
}

Vec AutoNormLoop(const Vec& h, const Vec& w, const Vec& gate) {
  const std::vector<Vec> candidates = Candidates(h);
  Vec x(kC, 0.0);
  for (int i = 0; i < 4; ++i) {
    for (int64_t j = 0; j < kC; ++j) x[j] += gate[i] * candidates[i][j];
  }
  const Vec f = SublayerLoop(x, w);
  Vec out(kC);
  for (int64_t j = 0; j < kC; ++j) out[j] = h[j] + f[j];
  return out;
}

Vec SoftmaxLoop(const Vec& scores, double temperature) {
  double top = scores[0], sum = 0;
  for (double s : scores) top = std::max(top, s);
  Vec p(scores.size());
  for (size_t i = 0; i < scores.size(); ++i)
    sum += p[i] = std::exp((scores[i] - top) / temperature);
  for (double& v : p) v /= sum;
  return p;
}

TEST(AutoNorm, GumbelSoftmaxGateMatchesLoop) {
  torch::manual_seed(4);
  auto connection = std::make_shared<AutoNormConnectionImpl>(Options(Method::kAutoNorm));
  connection->to(torch::kDouble);
  const Vec logits = {0.4, -0.3, 0.9, 0.1}, noise = {0.2, 1.1, -0.5, 0.3};
  {
    torch::NoGradGuard no_grad;
    connection->logits.copy_(torch::tensor(logits, torch::kDouble));
  }
  const torch::Tensor w = torch::randn({kC, kC}, torch::kDouble);
  const torch::Tensor h = torch::randn({1, 1, kC}, torch::kDouble) * 3;
  const Vec hv = Values(h), wv = Values(w);
  Vec noisy(4);
  for (int i = 0; i < 4; ++i) noisy[i] = logits[i] + noise[i];

  connection->SetGate(0.7, torch::tensor(noise, torch::kDouble));
  connection->train();
  ExpectNear(Values(connection->forward(h, TorchSublayer(w))),
             AutoNormLoop(hv, wv, SoftmaxLoop(noisy, 0.7)), 1e-10);
  connection->eval();  // no noise outside training
  ExpectNear(Values(connection->forward(h, TorchSublayer(w))),
             AutoNormLoop(hv, wv, SoftmaxLoop(logits, 0.7)), 1e-10);
  EXPECT_EQ(connection->choice(), 2);
}

TEST(AutoNorm, FreezingKeepsTheArgmaxAndStopsTheGateLearning) {
  torch::manual_seed(5);
  auto connection = std::make_shared<AutoNormConnectionImpl>(Options(Method::kAutoNorm));
  connection->to(torch::kDouble);
  {
    torch::NoGradGuard no_grad;
    connection->logits.copy_(torch::tensor({0.1, 0.7, -0.2, 0.3}, torch::kDouble));
  }
  const torch::Tensor w = torch::randn({kC, kC}, torch::kDouble);
  const torch::Tensor h = torch::randn({1, 1, kC}, torch::kDouble);
  connection->SetGate(0.5, torch::tensor({3.0, 0.0, 0.0, 0.0}, torch::kDouble));
  EXPECT_FALSE(connection->frozen());
  connection->Freeze();
  ASSERT_TRUE(connection->frozen());
  EXPECT_EQ(connection->choice(), 1);  // the logits' argmax, not the noisy one
  {
    torch::NoGradGuard no_grad;  // later logits no longer matter
    connection->logits.copy_(torch::tensor({5.0, -5.0, 0.0, 0.0}, torch::kDouble));
  }
  connection->train();
  const torch::Tensor out = connection->forward(h, TorchSublayer(w));
  ExpectNear(Values(out), AutoNormLoop(Values(h), Values(w), {0, 1, 0, 0}), 1e-10);
  out.sum().backward();
  const torch::Tensor grad = connection->logits.grad();
  EXPECT_TRUE(!grad.defined() || grad.abs().sum().item<double>() == 0);
  EXPECT_EQ(connection->choice(), 1);
  // The frozen choice is a buffer, so checkpoints carry it.
  bool found = false;
  for (const auto& item : connection->named_buffers()) found = found || item.key() == "frozen";
  EXPECT_TRUE(found);
}

// A looped model (n_layer 1, `loops` times) and an unrolled one (n_layer = loops) whose blocks
// are copies of the looped block's weights.
void ExpectLoopedEqualsUnrolled(Method method, Decay decay) {
  torch::manual_seed(6);
  GptConfig looped_config = TinyGpt(method);
  looped_config.n_layer = 1;
  looped_config.loops = 3;
  looped_config.connection.decay = decay;
  GptConfig unrolled_config = looped_config;
  unrolled_config.n_layer = 3;
  unrolled_config.loops = 1;
  Gpt looped(looped_config), unrolled(unrolled_config);
  looped->to(torch::kDouble);
  unrolled->to(torch::kDouble);
  {
    torch::NoGradGuard no_grad;
    const auto source = looped->named_parameters();
    for (auto& item : unrolled->named_parameters()) {
      std::string key = item.key();
      if (key.rfind("blocks.", 0) == 0) key = "blocks.0" + key.substr(key.find('.', 7));
      item.value().copy_(source[key]);
    }
  }
  looped->eval();
  unrolled->eval();
  const torch::Tensor idx = torch::tensor({{2, 5, 9, 1}}, torch::kLong);
  const torch::Tensor a = looped->forward(idx), b = unrolled->forward(idx);
  EXPECT_LT((a - b).abs().max().item<double>(), 1e-12) << MethodId(method);
  std::vector<ConnectionDiagnostics> diagnostics;
  looped->forward(idx, &diagnostics);
  EXPECT_EQ(diagnostics.size(), 6u);  // 2 per block application, depth order
}

TEST(Looped, ForwardEqualsUnrolledTiedCopies) {
  ExpectLoopedEqualsUnrolled(Method::kPreLn, Decay::kSqrt);
  ExpectLoopedEqualsUnrolled(Method::kAutoNorm, Decay::kSqrt);
  ExpectLoopedEqualsUnrolled(Method::kNgpt, Decay::kSqrt);
  // lambda_l depends on the block index, which the loop shares: compare without decay.
  ExpectLoopedEqualsUnrolled(Method::kProjSpheret, Decay::kNone);
}

TEST(Looped, PerLoopLossIsTheWeightedSumOfTheReadoutsCrossEntropy) {
  torch::manual_seed(7);
  GptConfig config = TinyGpt(Method::kPreLn);
  config.loops = 3;
  config.per_loop_loss = true;
  config.loop_loss_weights = {0.5, 1.0, 2.0};
  config.norm_penalty = 0.3;
  Gpt model(config);
  model->to(torch::kDouble);
  model->eval();
  const torch::Tensor idx = torch::tensor({{2, 5, 9, 1}}, torch::kLong);
  const std::vector<int64_t> targets = {5, 9, 1, 3};
  const Vec terms =
      Values(model->objective(idx, torch::tensor(targets, torch::kLong).view({1, -1})));
  ASSERT_EQ(terms.size(), 4u);

  // The loops by hand: embedding, then the two blocks three times, a readout after each.
  torch::NoGradGuard no_grad;
  torch::Tensor h = model->wte(idx) + model->wpe(torch::arange(4));
  const torch::Tensor h0 = h;
  double objective = 0, drift = 0;
  for (int k = 0; k < 3; ++k) {
    for (int64_t b = 0; b < 2; ++b) h = model->block_at(b).forward(h, nullptr);
    const double ce = CrossEntropyLoop(model->head(h), targets);
    EXPECT_NEAR(terms[k + 1], ce, 1e-10) << "loop " << k + 1;
    objective += config.loop_loss_weights[k] * ce;
    for (int64_t t = 0; t < 4; ++t) {
      const double d = std::log(Norm(Values(h[0][t]))) - std::log(Norm(Values(h0[0][t])));
      drift += d * d / 4.0 / 3.0;
    }
  }
  EXPECT_NEAR(terms[0], objective + 0.3 * drift, 1e-10);
  EXPECT_NEAR(model->loss(idx, torch::tensor(targets, torch::kLong).view({1, -1})).item<double>(),
              terms[3],
              1e-10);  // loss() is the last readout's
}

}  // namespace
}  // namespace spheret::nn
