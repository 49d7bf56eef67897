#include "worker/nn/autonorm.h"

#include <torch/torch.h>

#include <functional>

#include "worker/nn/euclidean_connections.h"
#include "worker/nn/norms.h"

namespace spheret::nn {

const std::array<std::string, AutoNormConnectionImpl::kCandidates>&
AutoNormConnectionImpl::CandidateNames() {
  static const std::array<std::string, kCandidates> names = {"layernorm", "rmsnorm", "dyt",
                                                             "identity"};
  return names;
}

AutoNormConnectionImpl::AutoNormConnectionImpl(const ConnectionOptions& options)
    : layernorm(MakeNorm(NormKind::kLayerNorm, options.n_embd, options.bias)),
      rmsnorm(MakeNorm(NormKind::kRmsNorm, options.n_embd, options.bias)),
      dyt(Dyt(DytOptions{options.n_embd, options.bias, options.dyt_alpha_init})) {
  logits = register_parameter("logits", torch::zeros({kCandidates}));
  frozen_index = register_buffer("frozen", torch::full({}, -1, torch::kLong));
  register_module("layernorm", layernorm.ptr());
  register_module("rmsnorm", rmsnorm.ptr());
  register_module("dyt", dyt.ptr());
}

void AutoNormConnectionImpl::SetGate(double temperature, const torch::Tensor& noise) {
  temperature_ = temperature;
  noise_ = noise;
}

bool AutoNormConnectionImpl::frozen() const { return frozen_index.item<int64_t>() >= 0; }

void AutoNormConnectionImpl::Freeze() {
  if (frozen()) return;
  torch::NoGradGuard no_grad;
  frozen_index.fill_(logits.argmax().item<int64_t>());
}

int64_t AutoNormConnectionImpl::choice() const {
  return frozen() ? frozen_index.item<int64_t>() : logits.argmax().item<int64_t>();
}

torch::Tensor AutoNormConnectionImpl::gate() const {
  if (frozen()) {
    return torch::one_hot(frozen_index.to(torch::kLong), kCandidates).to(logits.scalar_type());
  }
  torch::Tensor scores = logits;
  if (noise_.defined() && is_training()) scores = scores + noise_.to(logits.device());
  return torch::softmax(scores / temperature_, 0);
}

torch::Tensor AutoNormConnectionImpl::Step(const torch::Tensor& h, const Sublayer& sublayer,
                                           ConnectionDiagnostics* diagnostics) {
  const torch::Tensor g = gate();  // (kCandidates)
  const int64_t picked = frozen_index.item<int64_t>();
  torch::Tensor x;
  auto add = [&](int i, const std::function<torch::Tensor()>& candidate) {
    if (picked >= 0 && i != picked) return;  // frozen: the others are not even computed
    const torch::Tensor term = g[i] * candidate();
    x = x.defined() ? x + term : term;
  };
  add(0, [&] { return layernorm.forward(h); });
  add(1, [&] { return rmsnorm.forward(h); });
  add(2, [&] { return dyt.forward(h); });
  add(3, [&] { return h; });
  const torch::Tensor f = sublayer(x.to(h.scalar_type()));
  const torch::Tensor out = h + f;
  MeasureConnection(h, f, out, diagnostics);
  if (diagnostics != nullptr) {
    torch::NoGradGuard no_grad;
    const double prob =
        frozen() ? 1.0 : torch::softmax(logits / temperature_, 0).max().item<double>();
    diagnostics->extra = {{"gate_choice", static_cast<double>(choice())}, {"gate_prob", prob}};
  }
  return out;
}

}  // namespace spheret::nn
