// The block Jacobian's power-iteration estimates (worker/nn/jacobian.h) against the singular
// values of a dense Jacobian built here row by row, and the tangent-space conditioning of a
// proj_spheret block against a bound derived below.
//
// The bound (our derivation; the SpheretNorm paper's Proposition 6 itself is not in the sources
// this project has, so this is not claimed to be its statement). One proj_spheret sublayer maps
// each token h_t (radius r_t) to h'_t = r_t n(y_t), y_t = h_t + alpha z_t(h), z_t = F_t - (<h_t,
// F_t>/r_t^2) h_t. For a tangent input v (every v_t orthogonal to h_t) ||h_t|| does not move, so
//   J_T v = diag(cos theta_t) P_U (v + alpha Dz v),   cos theta_t = r_t / ||y_t||,
// with P_U the projection onto the output tangent spaces. On the input tangent space
// ||P_U v|| >= min cos theta_t ||v|| (the two tangent planes of a token meet at angle theta_t),
// so with c_min, c_max the extreme cos theta_t and eps = ||alpha Dz|| restricted to the tangent
// space:
//   sigma_max(J_T) <= c_max (1 + eps),   sigma_min(J_T) >= c_min (c_min - eps),
//   kappa_T <= c_max (1 + eps) / (c_min (c_min - eps))   (when eps < c_min),
// and a block's kappa_T is at most the product of its two sublayers' bounds.
#include "worker/nn/jacobian.h"

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <functional>

#include "worker/nn/gpt.h"
#include "worker/nn/sphere_connection.h"

namespace spheret::nn {
namespace {

using Map = std::function<torch::Tensor(const torch::Tensor&)>;

// d f(x) / d x as a dense (n x n) matrix, n = x.numel(), one backward per output.
torch::Tensor DenseJacobian(const Map& f, const torch::Tensor& x) {
  const torch::Tensor input = x.detach().clone().requires_grad_(true);
  const torch::Tensor y = f(input).reshape({-1});
  std::vector<torch::Tensor> rows;
  for (int64_t i = 0; i < y.numel(); ++i) {
    rows.push_back(
        torch::autograd::grad({y[i]}, {input}, {}, /*retain_graph=*/true)[0].reshape({-1}));
  }
  return torch::stack(rows);
}

// I - u u^T per token of x (1, T, C), as an (n x n) block-diagonal matrix.
torch::Tensor TangentProjector(const torch::Tensor& x) {
  const int64_t t_len = x.size(1), c = x.size(2);
  torch::Tensor p = torch::zeros({t_len * c, t_len * c}, x.options());
  for (int64_t t = 0; t < t_len; ++t) {
    const torch::Tensor u = x[0][t] / x[0][t].norm();
    p.narrow(0, t * c, c)
        .narrow(1, t * c, c)
        .copy_(torch::eye(c, x.options()) - torch::outer(u, u));
  }
  return p;
}

// Singular values, descending.
torch::Tensor SingularValues(const torch::Tensor& m) { return torch::linalg_svdvals(m); }

struct Tiny {
  Gpt model{nullptr};
  torch::Tensor block_input;  // (1, T, C): the first block's input
};

Tiny MakeTiny(Method method, double weight_scale) {
  torch::manual_seed(11);
  GptConfig config;
  config.vocab_size = 13;
  config.block_size = 4;
  config.n_layer = 2;
  config.n_head = 2;
  config.n_embd = 6;
  config.connection.method = method;
  config.bias = method != Method::kNgpt;  // nGPT has no biases
  Tiny tiny{Gpt(config), {}};
  tiny.model->to(torch::kDouble);
  tiny.model->eval();
  {
    torch::NoGradGuard no_grad;  // F larger than at init, so the bound has something to bound
    for (int64_t b = 0; b < 2; ++b) {
      tiny.model->block_at(b).attn->c_proj->weight.mul_(weight_scale);
      tiny.model->block_at(b).mlp->c_proj->weight.mul_(weight_scale);
      tiny.model->block_at(b).attn->c_attn->weight.mul_(weight_scale);
    }
  }
  ForwardRecord record;
  record.keep_block_inputs = true;
  torch::NoGradGuard no_grad;
  tiny.model->hidden(torch::tensor({{3, 1, 7, 12}}, torch::kLong), &record);
  tiny.block_input = record.block_inputs[0];
  return tiny;
}

void ExpectEstimatesMatchDense(Method method, double weight_scale) {
  SCOPED_TRACE(std::string(MethodId(method)) + " weights x" + std::to_string(weight_scale));
  Tiny tiny = MakeTiny(method, weight_scale);
  const CompositeModeGuard composite;
  BlockImpl& block = tiny.model->block_at(0);
  const Map f = [&](const torch::Tensor& h) { return block.forward(h, nullptr); };
  const torch::Tensor x = tiny.block_input;
  const torch::Tensor j = DenseJacobian(f, x);
  const torch::Tensor sigma = SingularValues(j);
  torch::Tensor y;
  {
    torch::NoGradGuard no_grad;
    y = f(x);
  }
  const int64_t n = x.numel(), tokens = x.size(1);
  // P_out J P_in has `tokens` zero singular values (the radial inputs); its restriction to the
  // tangent space has the others.
  const torch::Tensor tangent = SingularValues(TangentProjector(y).mm(j).mm(TangentProjector(x)));

  const JacobianEstimate e =
      EstimateJacobian(f, x, /*iterations=*/x.numel(), at::detail::createCPUGenerator(5));
  // To 1e-3 of the value, or of sigma_max where the value is rounding (a rank-deficient J:
  // nGPT's output is unit, so its radial output directions are lost).
  auto expect_match = [](double estimate, double dense, double top, const char* what) {
    const double tolerance = 1e-3 * (dense > 1e-6 * top ? dense : top);
    EXPECT_NEAR(estimate, dense, tolerance) << what;
  };
  const double top = sigma[0].item<double>(), bottom = sigma[n - 1].item<double>();
  const double t_top = tangent[0].item<double>(), t_bottom = tangent[n - tokens - 1].item<double>();
  expect_match(e.sigma_max, top, top, "sigma_max");
  expect_match(e.sigma_min, bottom, top, "sigma_min");
  expect_match(e.tangent_sigma_max, t_top, t_top, "tangent sigma_max");
  expect_match(e.tangent_sigma_min, t_bottom, t_top, "tangent sigma_min");
  // With fewer steps than dimensions (as in training) the extremes are approached from inside.
  const JacobianEstimate rough = EstimateJacobian(f, x, n / 3, at::detail::createCPUGenerator(5));
  EXPECT_LE(rough.sigma_max, top * (1 + 1e-9));
  EXPECT_GE(rough.sigma_min, bottom * (1 - 1e-9) - 1e-9 * top);
  EXPECT_GT(rough.sigma_max, 0.5 * top);
  std::printf(
      "%-12s x%.0f  dense sigma %.6g .. %.6g, estimate %.6g .. %.6g; tangent dense %.6g .. "
      "%.6g, estimate %.6g .. %.6g\n",
      std::string(MethodId(method)).c_str(), weight_scale, top, bottom, e.sigma_max, e.sigma_min,
      t_top, t_bottom, e.tangent_sigma_max, e.tangent_sigma_min);
}

TEST(Jacobian, EstimatesMatchTheDenseSingularValues) {
  for (double scale : {1.0, 8.0}) {
    ExpectEstimatesMatchDense(Method::kPreLn, scale);
    ExpectEstimatesMatchDense(Method::kProjSpheret, scale);
    ExpectEstimatesMatchDense(Method::kAutoNorm, scale);
    ExpectEstimatesMatchDense(Method::kNgpt, scale);
  }
}

// kappa_T of one proj_spheret sublayer at x (dense), and the bound above for it.
struct SublayerConditioning {
  double kappa = 0, bound = 0, eps = 0, c_min = 0;
};

SublayerConditioning ProjSublayer(SpheretConnectionImpl& connection, const Sublayer& sublayer,
                                  const torch::Tensor& x) {
  const int64_t n = x.numel(), tokens = x.size(1);
  const Map step = [&](const torch::Tensor& h) { return connection.forward(h, sublayer); };
  const double alpha = connection.alpha().item<double>();
  const Map z = [&](const torch::Tensor& h) {  // the tangent part of F, written out here
    const torch::Tensor f = sublayer(connection.inner_norm.forward(h));
    return f - (h * f).sum(-1, true) / h.pow(2).sum(-1, true) * h;
  };
  torch::Tensor y, zx;
  {
    torch::NoGradGuard no_grad;
    y = step(x);
    zx = z(x);
  }
  const torch::Tensor p_in = TangentProjector(x), p_out = TangentProjector(y);
  const torch::Tensor tangent = SingularValues(p_out.mm(DenseJacobian(step, x)).mm(p_in));
  SublayerConditioning out;
  out.kappa = tangent[0].item<double>() / tangent[n - tokens - 1].item<double>();
  out.eps = alpha * SingularValues(DenseJacobian(z, x).mm(p_in))[0].item<double>();
  // cos theta_t = ||h_t|| / ||h_t + alpha z_t||
  const torch::Tensor cosine = x.norm(2, -1) / (x + alpha * zx).norm(2, -1);
  out.c_min = cosine.min().item<double>();
  const double c_max = cosine.max().item<double>();
  out.bound = c_max * (1 + out.eps) / (out.c_min * (out.c_min - out.eps));
  return out;
}

TEST(Jacobian, ProjSpheretTangentConditioningObeysTheBound) {
  for (double scale : {1.0, 4.0, 8.0}) {
    SCOPED_TRACE("weights x" + std::to_string(scale));
    Tiny tiny = MakeTiny(Method::kProjSpheret, scale);
    BlockImpl& block = tiny.model->block_at(0);
    auto& attn_conn = *std::dynamic_pointer_cast<SpheretConnectionImpl>(block.conn_attn);
    auto& mlp_conn = *std::dynamic_pointer_cast<SpheretConnectionImpl>(block.conn_mlp);
    const Sublayer attn = [&](const torch::Tensor& h) { return block.attn(h); };
    const Sublayer mlp = [&](const torch::Tensor& h) { return block.mlp(h); };
    const CompositeModeGuard composite;
    const torch::Tensor x = tiny.block_input;
    torch::Tensor middle;
    {
      torch::NoGradGuard no_grad;
      middle = attn_conn.forward(x, attn);
    }
    const SublayerConditioning a = ProjSublayer(attn_conn, attn, x);
    const SublayerConditioning m = ProjSublayer(mlp_conn, mlp, middle);
    std::printf(
        "proj_spheret x%.0f: attn kappa_T %.6g <= bound %.6g (eps %.4g, c_min %.6g); mlp "
        "kappa_T %.6g <= bound %.6g (eps %.4g, c_min %.6g)\n",
        scale, a.kappa, a.bound, a.eps, a.c_min, m.kappa, m.bound, m.eps, m.c_min);
    for (const SublayerConditioning& s : {a, m}) {
      ASSERT_LT(s.eps, s.c_min) << "the bound needs eps < c_min";
      EXPECT_LE(s.kappa, s.bound * (1 + 1e-9));
      EXPECT_GE(s.kappa, 1.0);
    }
    const JacobianEstimate e =
        EstimateJacobian([&](const torch::Tensor& h) { return block.forward(h, nullptr); }, x,
                         x.numel(), at::detail::createCPUGenerator(9));
    EXPECT_LE(e.tangent_cond(), a.bound * m.bound * (1 + 1e-3));
    if (scale == 8.0) {
      EXPECT_GT(a.eps + m.eps, 0.05) << "the largest weights must move the bound";
    }
  }
}

}  // namespace
}  // namespace spheret::nn
