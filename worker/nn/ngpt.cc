#include "worker/nn/ngpt.h"

#include <torch/torch.h>

#include <cmath>
#include <string>

#include "worker/nn/euclidean_connections.h"

namespace spheret::nn {
namespace {

bool EndsWith(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

NgptScaling NgptAlphaScaling(double alpha_init, int64_t n_embd) {
  return {alpha_init, 1.0 / std::sqrt(static_cast<double>(n_embd))};
}
NgptScaling NgptQkScaling(int64_t n_embd) {
  return {1.0, 1.0 / std::sqrt(static_cast<double>(n_embd))};
}
NgptScaling NgptUvScaling() { return {1.0, 1.0}; }
NgptScaling NgptLogitScaling(int64_t n_embd) {
  return {1.0, 1.0 / std::sqrt(static_cast<double>(n_embd))};
}

torch::Tensor UnitNormalize(const torch::Tensor& x) {
  const torch::Tensor x32 = x.element_size() < 4 ? x.to(torch::kFloat) : x;
  return x32 * torch::rsqrt(x32.pow(2).sum(-1, /*keepdim=*/true).clamp_min(1e-12));
}

torch::Tensor NgptQueryKey(const torch::Tensor& x, const torch::Tensor& s_qk) {
  return s_qk * UnitNormalize(x);  // (B, nh, T, hs): the norm is over one head's hs
}

torch::Tensor NgptSwiGlu(const torch::Tensor& u, const torch::Tensor& nu, const torch::Tensor& s_u,
                         const torch::Tensor& s_nu, int64_t n_embd) {
  const torch::Tensor gate = nu * (s_nu * std::sqrt(static_cast<double>(n_embd)));  // (B, T, H)
  return (u * s_u) * torch::silu(gate);                                             // (B, T, H)
}

NgptConnectionImpl::NgptConnectionImpl(const ConnectionOptions& options) {
  const NgptScaling scaling = NgptAlphaScaling(options.ngpt_alpha_init, options.n_embd);
  alpha_scale = scaling.factor();
  alpha = register_parameter("alpha", torch::full({options.n_embd}, scaling.scale));
}

torch::Tensor NgptConnectionImpl::step() const { return (alpha * alpha_scale).abs(); }

torch::Tensor NgptConnectionImpl::Step(const torch::Tensor& h, const Sublayer& sublayer,
                                       ConnectionDiagnostics* diagnostics) {
  const torch::Tensor f = sublayer(h);  // (B, T, C)
  const torch::Tensor h32 = h.element_size() < 4 ? h.to(torch::kFloat) : h;
  const torch::Tensor out = UnitNormalize(h32 + step() * (UnitNormalize(f) - h32));
  MeasureConnection(h, f, out, diagnostics);
  if (diagnostics != nullptr) diagnostics->alpha = step().detach().mean().item<double>();
  return out.to(h.scalar_type());
}

void NormalizeNgptWeights(torch::nn::Module& model) {
  torch::NoGradGuard no_grad;
  for (const auto& item : model.named_parameters()) {
    const std::string& name = item.key();
    torch::Tensor p = item.value();
    int64_t dim = -1;
    if (name == "wte.weight" || name == "wpe.weight" || name == "lm_head.weight" ||
        EndsWith(name, "c_attn.weight") || EndsWith(name, "c_fc.weight")) {
      dim = 1;  // (out, C): each row over the embedding dimension
    } else if (EndsWith(name, "c_proj.weight")) {
      dim = 0;  // (C, in): each column
    }
    if (dim < 0) continue;
    p.div_(p.norm(2, dim, /*keepdim=*/true).clamp_min(1e-12));
  }
}

}  // namespace spheret::nn
