#include "worker/nn/euclidean_connections.h"

#include <torch/torch.h>

#include "worker/nn/norm_fused.h"
#include "worker/nn/norms.h"

namespace spheret::nn {

void MeasureConnection(const torch::Tensor& h, const torch::Tensor& f, const torch::Tensor& out,
                       ConnectionDiagnostics* diagnostics) {
  if (diagnostics == nullptr) return;
  torch::NoGradGuard no_grad;
  const torch::Tensor h32 = h.to(torch::kFloat), f32 = f.to(torch::kFloat);
  const torch::Tensor o32 = out.to(torch::kFloat);
  const torch::Tensor nh = h32.norm(2, -1).clamp_min(1e-6);  // (B, T)
  const torch::Tensor no = o32.norm(2, -1).clamp_min(1e-6);
  const torch::Tensor cosine = ((h32 * o32).sum(-1) / (nh * no)).clamp(-1.0, 1.0);
  diagnostics->hidden_norm = no.mean().item<double>();
  diagnostics->theta = torch::acos(cosine).mean().item<double>();
  diagnostics->alpha.reset();
  diagnostics->radial =
      ((h32 * f32).sum(-1).abs() / (nh * f32.norm(2, -1).clamp_min(1e-6))).mean().item<double>();
}

PreNormConnectionImpl::PreNormConnectionImpl(const ConnectionOptions& options) {
  if (options.method == Method::kPreDyt) {
    norm =
        torch::nn::AnyModule(Dyt(DytOptions{options.n_embd, options.bias, options.dyt_alpha_init}));
  } else {
    norm = MakeNorm(NormKind::kLayerNorm, options.n_embd, options.bias);
  }
  register_module("norm", norm.ptr());
}

const LayerNormImpl* PreNormConnectionImpl::input_layer_norm() const {
  return dynamic_cast<const LayerNormImpl*>(norm.ptr().get());
}

torch::Tensor PreNormConnectionImpl::Step(const torch::Tensor& h, const Sublayer& sublayer,
                                          ConnectionDiagnostics* diagnostics) {
  NormChain none;
  return StepChained(h, sublayer, diagnostics, &none);
}

torch::Tensor PreNormConnectionImpl::StepChained(const torch::Tensor& h, const Sublayer& sublayer,
                                                 ConnectionDiagnostics* diagnostics,
                                                 NormChain* chain) {
  const torch::Tensor f =
      sublayer(chain->normed_in.defined() ? chain->normed_in : norm.forward(h));  // (B, T, C)
  torch::Tensor out;
  if (chain->next != nullptr) {
    UpdateAndNorm fused = AddLayerNormFused(h, f, *chain->next);
    out = fused.out;
    chain->normed_out = fused.normed;
  } else {
    out = h + f;
  }
  MeasureConnection(h, f, out, diagnostics);
  return out;
}

PostLnConnectionImpl::PostLnConnectionImpl(const ConnectionOptions& options)
    : ln(MakeNorm(NormKind::kLayerNorm, options.n_embd, options.bias)) {
  register_module("ln", ln.ptr());
}

torch::Tensor PostLnConnectionImpl::Step(const torch::Tensor& h, const Sublayer& sublayer,
                                         ConnectionDiagnostics* diagnostics) {
  const torch::Tensor f = sublayer(h);
  const torch::Tensor out = ln.forward(h + f);
  MeasureConnection(h, f, out, diagnostics);
  return out;
}

PeriLnConnectionImpl::PeriLnConnectionImpl(const ConnectionOptions& options)
    : ln_in(MakeNorm(NormKind::kLayerNorm, options.n_embd, options.bias)),
      ln_out(MakeNorm(NormKind::kLayerNorm, options.n_embd, options.bias)) {
  register_module("ln_in", ln_in.ptr());
  register_module("ln_out", ln_out.ptr());
}

torch::Tensor PeriLnConnectionImpl::Step(const torch::Tensor& h, const Sublayer& sublayer,
                                         ConnectionDiagnostics* diagnostics) {
  const torch::Tensor f = sublayer(ln_in.forward(h));
  const torch::Tensor out = h + ln_out.forward(f);
  MeasureConnection(h, f, out, diagnostics);
  return out;
}

KeelConnectionImpl::KeelConnectionImpl(const ConnectionOptions& options)
    : ln_in(MakeNorm(NormKind::kLayerNorm, options.n_embd, options.bias)),
      ln_post(MakeNorm(NormKind::kLayerNorm, options.n_embd, options.bias)),
      k(2.0 * options.n_layer) {
  register_module("ln_in", ln_in.ptr());
  register_module("ln_post", ln_post.ptr());
}

torch::Tensor KeelConnectionImpl::Step(const torch::Tensor& h, const Sublayer& sublayer,
                                       ConnectionDiagnostics* diagnostics) {
  const torch::Tensor f = sublayer(ln_in.forward(h));
  const torch::Tensor out = ln_post.forward(k * h + f);
  MeasureConnection(h, f, out, diagnostics);
  return out;
}

}  // namespace spheret::nn
