#include "worker/nn/autonorm.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <functional>

#include "protocol/metric_catalog.h"
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
      dyt(Dyt(DytOptions{options.n_embd, options.bias, options.dyt_alpha_init})),
      mode_(options.autonorm_mode) {
  const bool learned = mode_ == AutoNormMode::kLearned;
  // A random gate has no parameters at all: nothing for the optimizer, nothing unused.
  if (learned) logits = register_parameter("logits", torch::zeros({kCandidates}));
  picked_index = register_buffer(learned ? "frozen" : "choice", torch::full({}, -1, torch::kLong));
  register_module("layernorm", layernorm.ptr());
  register_module("rmsnorm", rmsnorm.ptr());
  register_module("dyt", dyt.ptr());
}

void AutoNormConnectionImpl::SetGate(double temperature, const torch::Tensor& noise) {
  TORCH_CHECK(mode_ == AutoNormMode::kLearned, "SetGate is for autonorm_mode learned");
  temperature_ = temperature;
  noise_ = noise;
}

bool AutoNormConnectionImpl::frozen() const {
  return mode_ == AutoNormMode::kLearned && picked() >= 0;
}

void AutoNormConnectionImpl::Freeze() {
  TORCH_CHECK(mode_ == AutoNormMode::kLearned, "Freeze is for autonorm_mode learned");
  if (frozen()) return;
  torch::NoGradGuard no_grad;
  picked_index.fill_(logits.argmax().item<int64_t>());
}

void AutoNormConnectionImpl::Pick(int64_t candidate) {
  TORCH_CHECK(mode_ != AutoNormMode::kLearned, "Pick is for the random autonorm modes");
  TORCH_CHECK(candidate >= 0 && candidate < kCandidates, "no AutoNorm candidate ", candidate);
  torch::NoGradGuard no_grad;
  picked_index.fill_(candidate);
}

int64_t AutoNormConnectionImpl::choice() const {
  if (picked() >= 0 || mode_ != AutoNormMode::kLearned) return picked();
  return logits.argmax().item<int64_t>();
}

torch::Tensor AutoNormConnectionImpl::gate() const {
  if (picked() >= 0) {  // (Module::to(dtype) converts integer buffers too: back to int64.)
    return torch::one_hot(picked_index.to(torch::kLong), kCandidates).to(torch::kFloat);
  }
  if (mode_ != AutoNormMode::kLearned) return torch::full({kCandidates}, 1.0 / kCandidates);
  torch::Tensor scores = logits;
  if (noise_.defined() && is_training()) scores = scores + noise_.to(logits.device());
  return torch::softmax(scores / temperature_, 0);
}

double AutoNormConnectionImpl::TopProbability() const {
  switch (mode_) {
    case AutoNormMode::kLearned:
      return frozen() ? 1.0 : torch::softmax(logits / temperature_, 0).max().item<double>();
    case AutoNormMode::kRandom:
      return 1.0 / kCandidates;
    case AutoNormMode::kRandomFixed:
      break;
  }
  return 1.0;
}

torch::Tensor AutoNormConnectionImpl::Step(const torch::Tensor& h, const Sublayer& sublayer,
                                           ConnectionDiagnostics* diagnostics) {
  const torch::Tensor g = gate().to(h.device());  // (kCandidates)
  const int64_t one = picked();
  torch::Tensor x;
  auto add = [&](int i, const std::function<torch::Tensor()>& candidate) {
    if (one >= 0 && i != one) return;  // a one-hot gate: the others are not even computed
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
    diagnostics->extra = {{protocol::kGateChoice, static_cast<double>(choice())},
                          {protocol::kGateProb, TopProbability()}};
  }
  return out;
}

torch::Tensor DrawGateChoices(uint64_t seed, int64_t count) {
  torch::Generator generator = at::detail::createCPUGenerator(seed);
  return torch::randint(AutoNormConnectionImpl::kCandidates, {count}, generator,
                        torch::TensorOptions(torch::kLong));
}

}  // namespace spheret::nn
