// Each Euclidean baseline against a plain loop written here from docs/methods.md §1.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <string>
#include <vector>

#include "worker/nn/connection.h"

namespace spheret::nn {
namespace {

constexpr int64_t kC = 5;
using Vec = std::vector<double>;

Vec Values(const torch::Tensor& t) {
  const torch::Tensor c = t.contiguous().to(torch::kDouble);
  return Vec(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

// The parameters of a connection, read by name.
class Params {
 public:
  explicit Params(const torch::nn::Module& module) : named_(module.named_parameters()) {}
  Vec operator()(const std::string& name) const { return Values(named_[name]); }
  double Scalar(const std::string& name) const { return named_[name].item<double>(); }

 private:
  torch::OrderedDict<std::string, torch::Tensor> named_;
};

Vec LayerNormLoop(const Vec& x, const Vec& w, const Vec& b) {
  double mean = 0, var = 0;
  for (double v : x) mean += v / x.size();
  for (double v : x) var += (v - mean) * (v - mean) / x.size();
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = (x[i] - mean) / std::sqrt(var + 1e-5) * w[i] + b[i];
  return y;
}

Vec DytLoop(const Vec& x, double a, const Vec& g, const Vec& b) {
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = g[i] * std::tanh(a * x[i]) + b[i];
  return y;
}

// F(x)_j = tanh(sum_k W_jk x_k)
Vec SublayerLoop(const Vec& x, const Vec& w) {
  Vec y(kC, 0.0);
  for (int64_t j = 0; j < kC; ++j) {
    for (int64_t k = 0; k < kC; ++k) y[j] += w[j * kC + k] * x[k];
    y[j] = std::tanh(y[j]);
  }
  return y;
}

Vec Add(const Vec& a, const Vec& b, double ka = 1.0) {
  Vec y(a.size());
  for (size_t i = 0; i < a.size(); ++i) y[i] = ka * a[i] + b[i];
  return y;
}

// One token's step for `method`, by hand.
Vec ReferenceStep(Method method, const Vec& h, const Vec& w, const Params& p, int64_t n_layer) {
  auto f = [&](const Vec& x) { return SublayerLoop(x, w); };
  switch (method) {
    case Method::kPreLn:
      return Add(h, f(LayerNormLoop(h, p("norm.weight"), p("norm.bias"))));
    case Method::kPreDyt:
      return Add(h, f(DytLoop(h, p.Scalar("norm.a"), p("norm.g"), p("norm.b"))));
    case Method::kPostLn:
      return LayerNormLoop(Add(h, f(h)), p("ln.weight"), p("ln.bias"));
    case Method::kPeriLn:
      return Add(h, LayerNormLoop(f(LayerNormLoop(h, p("ln_in.weight"), p("ln_in.bias"))),
                                  p("ln_out.weight"), p("ln_out.bias")));
    case Method::kKeel:
      return LayerNormLoop(
          Add(h, f(LayerNormLoop(h, p("ln_in.weight"), p("ln_in.bias"))), 2.0 * n_layer),
          p("ln_post.weight"), p("ln_post.bias"));
    default:
      ADD_FAILURE() << "not a Euclidean method";
      return h;
  }
}

TEST(EuclideanConnectionTest, EachBaselineMatchesAPlainLoop) {
  torch::manual_seed(7);
  const int64_t n_layer = 3;
  for (Method method :
       {Method::kPreLn, Method::kPreDyt, Method::kPostLn, Method::kPeriLn, Method::kKeel}) {
    ConnectionOptions options;
    options.method = method;
    options.n_embd = kC;
    options.n_layer = n_layer;
    Connection connection = MakeConnection(options, {2, 1});
    connection->to(torch::kDouble);
    {  // Random parameters, so that a swapped weight and bias or a missing term shows.
      torch::NoGradGuard no_grad;
      for (torch::Tensor& p : connection->parameters()) p.copy_(torch::randn_like(p));
    }
    const torch::Tensor w = torch::randn({kC, kC}, torch::kDouble);
    const torch::Tensor h = torch::randn({2, 3, kC}, torch::kDouble);
    const Sublayer sublayer = [&](const torch::Tensor& x) { return torch::tanh(x.matmul(w.t())); };
    const torch::Tensor out = connection->forward(h, sublayer);
    ASSERT_EQ(out.sizes(), h.sizes());
    const Params params(*connection);
    const Vec w_values = Values(w);
    const torch::Tensor rows = h.reshape({-1, kC});
    const torch::Tensor out_rows = out.reshape({-1, kC});
    for (int64_t r = 0; r < rows.size(0); ++r) {
      const Vec expected = ReferenceStep(method, Values(rows[r]), w_values, params, n_layer);
      const Vec got = Values(out_rows[r]);
      for (int64_t i = 0; i < kC; ++i) {
        EXPECT_NEAR(got[i], expected[i], 1e-12) << MethodId(method) << " row " << r << " i " << i;
      }
    }
  }
}

TEST(EuclideanConnectionTest, BiasKnobRemovesNormBiases) {
  ConnectionOptions options;
  options.n_embd = kC;
  options.bias = false;
  for (Method method : {Method::kPreLn, Method::kPreDyt, Method::kPeriLn, Method::kKeel}) {
    options.method = method;
    for (const auto& item : MakeConnection(options, {1, 0})->named_parameters()) {
      EXPECT_EQ(item.key().find("bias"), std::string::npos)
          << MethodId(method) << " " << item.key();
      EXPECT_NE(item.key(), "norm.b") << MethodId(method);
    }
  }
}

}  // namespace
}  // namespace spheret::nn
