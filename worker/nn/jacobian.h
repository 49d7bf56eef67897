// The Jacobian J = df/dx of a map f: (1, T, C) -> (1, T, C) (one block of the GPT on one
// sequence), through Jacobian-vector products (double backward) and vector-Jacobian products,
// never formed: Lanczos iterations on J^T J (the Krylov refinement of power iteration, with full
// reorthogonalization) give its extreme eigenvalues, sigma_max^2 and sigma_min^2. With as many
// iterations as dimensions the values are exact up to rounding; with fewer they are estimates,
// sigma_max from below and sigma_min from above. The tangent variant restricts
// J to the tangent spaces of the per-token spheres, P_out J P_in with P_in = I - u u^T per token
// of the input x and P_out the same at f(x): the directions a normalization does not discard
// (DN_x = (1/||x||)(I - u u^T)). Run f under a CompositeModeGuard (worker/nn/connection.h) and
// in eval mode.
#pragma once

#include <torch/types.h>

#include <functional>
#include <utility>

namespace spheret::nn {

using Operator = std::function<torch::Tensor(const torch::Tensor&)>;

// The linear maps v -> J v and u -> J^T u of f at x, J = df/dx, by double backward (f must be
// twice differentiable: run it under a CompositeModeGuard). Holds f's graph; not thread-safe.
class Linearization {
 public:
  Linearization(const Operator& f, const torch::Tensor& x);
  torch::Tensor Jv(const torch::Tensor& v);        // v, result: shaped as x / f(x)
  torch::Tensor JTu(const torch::Tensor& u);       // u shaped as f(x), result as x
  torch::Tensor y() const { return y_.detach(); }  // f(x)

 private:
  torch::Tensor x_, y_, w_, jt_w_;
};

// {sigma_max, sigma_min} of A restricted to the range of the orthogonal projection `project`,
// from products A v (`a`) and A^T u (`a_t`): the extreme Ritz values of A^T A after `iterations`
// Lanczos steps (full reorthogonalization) from `start`. A Krylov refinement of power iteration:
// sigma_max is a lower estimate and sigma_min an upper estimate of the true values (Ritz values
// of a symmetric matrix lie inside its spectrum); both exact once the steps reach the dimension.
std::pair<double, double> SingularRange(const Operator& a, const Operator& a_t,
                                        const Operator& project, const torch::Tensor& start,
                                        int64_t iterations);

struct JacobianEstimate {
  double sigma_max = 0, sigma_min = 0;                  // of J
  double tangent_sigma_max = 0, tangent_sigma_min = 0;  // of P_out J P_in on the tangent space
  // Mean over tokens of |<f(x) - x, u>| / ||f(x) - x||: the radial share of the update.
  double update_radial = 0;
  double cond() const { return sigma_max / sigma_min; }
  double tangent_cond() const { return tangent_sigma_max / tangent_sigma_min; }
};

// `iterations` Lanczos steps (one J v and one J^T u each) for the whole space and as many for the
// tangent space, from a start vector drawn from `generator` (on the CPU, moved to x's device).
// x: (1, T, C) floating.
JacobianEstimate EstimateJacobian(const Operator& f, const torch::Tensor& x, int64_t iterations,
                                  torch::Generator generator);

}  // namespace spheret::nn
