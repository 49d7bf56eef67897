// The Jacobian J = df/dx of a map f: (1, T, C) -> (1, T, C) (one update of the GPT, or the whole
// stack, on one sequence), through Jacobian-vector products (double backward) and
// vector-Jacobian products, never formed: Golub-Kahan-Lanczos bidiagonalization of J (the
// Krylov refinement of power iteration, with full reorthogonalization) gives its extreme
// singular values. With as many steps as dimensions the values are exact up to rounding and
// certified from both sides; with fewer, sigma_max is a lower and sigma_min an upper value, and
// nothing bounds sigma_min from below. Run f under a CompositeModeGuard (worker/nn/connection.h)
// and in eval mode, in fp64 where sigma_min matters (fp32 rounding alone is ~1e-7 sigma_max).
// worker/nn/model_stability.h applies it to a GPT.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <functional>

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

// What `steps` Golub-Kahan steps say about the singular values of a square map A (n = start's
// number of elements): A V = U B with orthonormal V, U and B (steps x steps) upper bidiagonal.
struct SingularRange {
  // sigma_max(B): a lower value of sigma_max(A) (Ritz values lie inside the spectrum).
  double sigma_max = 0;
  // ||A v|| for B's smallest right singular vector v = V y (||v|| = 1), evaluated as one more
  // product: an upper bound on sigma_min(A) (sigma_min(A) = min ||A v|| over unit v), below the
  // truth by at most that product's rounding (about 1e-16 sigma_max in fp64); how far above it
  // is, nothing says unless `complete`.
  double sigma_min_upper = 0;
  // A lower bound on sigma_min(A): sigma_min(B) - `tolerance` when the Krylov space spans all n
  // dimensions (complete), clamped at 0; 0 otherwise (a few steps cannot exclude a smaller
  // singular value in a direction they never met: nothing is certified).
  double sigma_min_lower = 0;
  // The stated accuracy of the complete case: 8 n eps sigma_max(B) (eps of the dtype), a bound
  // with room on |sigma_i(B) - sigma_i(A)| for A as the products compute it (the
  // bidiagonalization with full reorthogonalization is backward stable to a few n eps ||A||;
  // checked against dense SVDs in tests/worker/nn/jacobian_test.cc), not a proof.
  double tolerance = 0;
  int64_t steps = 0;      // Golub-Kahan steps taken: min(`iterations`, n)
  bool complete = false;  // steps == n: every value above exact to `tolerance`
};

// The singular range of A from products A v (`a`) and A^T u (`a_t`), both n -> n on tensors
// shaped as `start` (a nonzero tensor that starts the Krylov space), after min(`iterations`, n)
// Golub-Kahan steps with full reorthogonalization; on a breakdown (an invariant subspace, or a
// null direction of A) the process continues from a random vector orthogonal to those met, drawn
// from `generator`, so a complete run always spans the whole space. Memory: 2 steps vectors.
SingularRange MeasureSingularRange(const Operator& a, const Operator& a_t,
                                   const torch::Tensor& start, int64_t iterations,
                                   torch::Generator generator);

}  // namespace spheret::nn
