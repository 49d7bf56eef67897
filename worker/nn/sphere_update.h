// The sphere update of geonorm and the SpheretNorm family (docs/methods.md §2), as pure functions.
//
// Every method maps (h, F, alpha) to h' on the sphere of radius ||h||, per token over the last
// dim of a (..., C) tensor:
//   z    = F - (<h,F> / max(||h||^2, 1e-12)) h          tangent part of F (Gram-Schmidt)
//   beta = alpha ||z|| / ||h||                           (norms with the 1e-12 clamp on squares)
//   h'   = cos(theta) h + ||h|| sin(theta) z / ||z||,  theta = phi(beta)
// with phi(beta) = p atan(beta / p) (p = 1 proj, p = 2 cay, p -> inf geonorm), capped at
// angle_max where the method caps. `SphereUpdateComposite` evaluates each method's literal formula
// from the docs/methods.md table with autograd over ATen ops; `SphereUpdateFused` (sphere_fused.h)
// evaluates the same map in the theta form above with a hand-written backward.
//
// All math runs in fp32 at least (fp64 stays fp64); the result has h's dtype.
#pragma once

#include <torch/types.h>

#include "config/connection_options.h"

namespace spheret::nn {

// The rotation rule of one sphere method: theta = p atan(beta / p) (beta itself when p is
// infinite), then min(theta, cap) when `capped`.
struct SphereRule {
  Method method = Method::kGeoNorm;
  double p = 1.0;  // Only p_spheret reads it.
  double angle_max = 0.78539816339744830962;

  // The unified form of `method`: its effective p (inf for geonorm) and whether it caps.
  double effective_p() const;
  bool capped() const;
};

// The rule for `options` (options.method must be a sphere method).
SphereRule MakeSphereRule(const ConnectionOptions& options);

// theta = phi(beta) for `rule` (elementwise, differentiable).
torch::Tensor RotationAngle(const torch::Tensor& beta, const SphereRule& rule);

// The compute dtype for the update: fp64 if any input is fp64, else fp32.
torch::ScalarType SphereComputeType(const torch::Tensor& h, const torch::Tensor& f);

// h' by the literal formula of rule.method. h, f: (..., C); alpha: 0-dim.
torch::Tensor SphereUpdateComposite(const torch::Tensor& h, const torch::Tensor& f,
                                    const torch::Tensor& alpha, const SphereRule& rule);

// Per-token geometry of one update, for diagnostics (no autograd). Each tensor is (...,) = one
// value per token: ||h||, theta, and the radial share |<h,F>| / (||h|| ||F||).
struct SphereGeometry {
  torch::Tensor hidden_norm, theta, radial;
};
SphereGeometry MeasureSphereUpdate(const torch::Tensor& h, const torch::Tensor& f,
                                   const torch::Tensor& alpha, const SphereRule& rule);

}  // namespace spheret::nn
