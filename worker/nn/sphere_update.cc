#include "worker/nn/sphere_update.h"

#include <torch/torch.h>

#include <cmath>
#include <limits>

namespace spheret::nn {
namespace {

constexpr double kEps = 1e-12;  // Clamp on squared norms.

// sqrt(max(sum(x^2, -1), eps)), keepdim: (..., 1).
torch::Tensor ClampedNorm(const torch::Tensor& x) {
  return x.square().sum(-1, /*keepdim=*/true).clamp_min(kEps).sqrt();
}

}  // namespace

double SphereRule::effective_p() const {
  switch (method) {
    case Method::kGeoNorm:
      return std::numeric_limits<double>::infinity();
    case Method::kProjSpheret:
      return 1.0;
    case Method::kCaySpheret:
      return 2.0;
    default:
      return p;
  }
}

bool SphereRule::capped() const {
  switch (method) {
    case Method::kProjSpheret:
      return false;
    case Method::kPSpheret:
      return p > 1.0;
    default:
      return true;
  }
}

SphereRule MakeSphereRule(const ConnectionOptions& options) {
  return SphereRule{options.method, options.p, options.angle_max};
}

torch::Tensor RotationAngle(const torch::Tensor& beta, const SphereRule& rule) {
  const double p = rule.effective_p();
  torch::Tensor theta = std::isinf(p) ? beta : p * torch::atan(beta / p);
  return rule.capped() ? theta.clamp_max(rule.angle_max) : theta;
}

torch::ScalarType SphereComputeType(const torch::Tensor& h, const torch::Tensor& f) {
  const bool wide = h.scalar_type() == torch::kDouble || f.scalar_type() == torch::kDouble;
  return wide ? torch::kDouble : torch::kFloat;
}

torch::Tensor SphereUpdateComposite(const torch::Tensor& h_in, const torch::Tensor& f_in,
                                    const torch::Tensor& alpha_in, const SphereRule& rule) {
  const torch::ScalarType type = SphereComputeType(h_in, f_in);
  const torch::Tensor h = h_in.to(type), f = f_in.to(type), alpha = alpha_in.to(type);  // (..., C)
  const torch::Tensor nh2 = h.square().sum(-1, true).clamp_min(kEps);                   // (..., 1)
  const torch::Tensor nh = nh2.sqrt();
  const torch::Tensor z = f - ((h * f).sum(-1, true) / nh2) * h;  // (..., C)
  const torch::Tensor nz = ClampedNorm(z);                        // (..., 1)
  const torch::Tensor beta = alpha * nz / nh;
  torch::Tensor out;
  switch (rule.method) {
    case Method::kProjSpheret: {  // ||h|| (h + alpha z) / ||h + alpha z||
      const torch::Tensor v = h + alpha * z;
      out = nh * v / ClampedNorm(v);
      break;
    }
    case Method::kCaySpheret: {  // ((4 - b^2) h + 4 g z) / (4 + b^2), g capped
      // angle_max none: g = alpha, theta = 2 atan(beta / 2) < pi (no minimum: its other branch's
      // gradient would be 0 x inf).
      const torch::Tensor g =
          std::isinf(rule.angle_max)
              ? alpha.expand_as(nz)
              : torch::minimum(alpha.expand_as(nz), 2.0 * std::tan(rule.angle_max / 2.0) * nh / nz);
      const torch::Tensor b2 = (g * nz / nh).square();
      out = ((4.0 - b2) * h + 4.0 * g * z) / (4.0 + b2);
      break;
    }
    default: {  // geonorm and p_spheret: the exponential map at angle theta.
      const torch::Tensor theta = RotationAngle(beta, rule);
      out = torch::cos(theta) * h + nh * torch::sin(theta) * z / nz;
      break;
    }
  }
  return out.to(h_in.scalar_type());
}

SphereGeometry MeasureSphereUpdate(const torch::Tensor& h_in, const torch::Tensor& f_in,
                                   const torch::Tensor& alpha_in, const SphereRule& rule) {
  torch::NoGradGuard no_grad;
  const torch::ScalarType type = SphereComputeType(h_in, f_in);
  const torch::Tensor h = h_in.to(type), f = f_in.to(type), alpha = alpha_in.to(type);
  const torch::Tensor nh = ClampedNorm(h);  // (..., 1)
  const torch::Tensor hf = (h * f).sum(-1, true);
  const torch::Tensor z = f - (hf / nh.square()) * h;
  const torch::Tensor beta = alpha * ClampedNorm(z) / nh;
  SphereGeometry geometry;
  geometry.hidden_norm = nh.squeeze(-1);
  geometry.theta = RotationAngle(beta, rule).squeeze(-1);
  geometry.radial = (hf.abs() / (nh * ClampedNorm(f))).squeeze(-1);
  return geometry;
}

}  // namespace spheret::nn
