// The Jacobian J = df/dx of a map f: (1, T, C) -> (1, T, C) (one update of the GPT, or the whole
// stack, on one sequence), through Jacobian-vector products (double backward) and
// vector-Jacobian products, never formed: Lanczos iterations on J^T J (the Krylov refinement of
// power iteration, with full reorthogonalization) give its extreme eigenvalues, sigma_max^2 and
// sigma_min^2. With as many iterations as dimensions the values are exact up to rounding; with
// fewer they are estimates, sigma_max from below and sigma_min from above. Run f under a
// CompositeModeGuard (worker/nn/connection.h) and in eval mode. worker/nn/model_stability.h
// applies it to a GPT.
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

}  // namespace spheret::nn
