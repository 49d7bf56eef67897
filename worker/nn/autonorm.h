// AutoNorm (docs/methods.md §3): pre-norm whose norm is a learned choice among
// N = (LayerNorm, RMSNorm, DyT, identity), per sublayer,
//   h <- h + F(sum_i g_i N_i(h)),   g = softmax((logits + G) / tau)
// with Gumbel noise G (training only) and temperature tau set once per step by the trainer
// (SetGate), so every shard and rank of a step draws the same gate. After Freeze (AutoNorm-S,
// gate_freeze_step) the gate is the one-hot of the argmax at that moment, kept in the buffer
// `frozen`, and the logits get no gradient.
#pragma once

#include <array>
#include <string>

#include "worker/nn/connection.h"

namespace spheret::nn {

class AutoNormConnectionImpl : public ConnectionImpl {
 public:
  static constexpr int kCandidates = 4;
  // The candidates' names, in gate order.
  static const std::array<std::string, kCandidates>& CandidateNames();

  explicit AutoNormConnectionImpl(const ConnectionOptions& options);
  // The gate of the next forwards: temperature > 0 and Gumbel noise (kCandidates) or an
  // undefined tensor for none. Both default to 1 and none.
  void SetGate(double temperature, const torch::Tensor& noise);
  // Freezes the gate to the current argmax of the logits (no-op when frozen).
  void Freeze();
  bool frozen() const;
  // The candidate the gate picks: the frozen one, else argmax of the logits.
  int64_t choice() const;
  // The gate weights g (kCandidates), differentiable in the logits unless frozen.
  torch::Tensor gate() const;

  torch::Tensor logits;        // (kCandidates) learnable, init 0 (a uniform gate)
  torch::Tensor frozen_index;  // buffer "frozen": () int64, -1 while learning
  torch::nn::AnyModule layernorm, rmsnorm, dyt;

 protected:
  torch::Tensor Step(const torch::Tensor& h, const Sublayer& sublayer,
                     ConnectionDiagnostics* diagnostics) override;

 private:
  double temperature_ = 1.0;
  torch::Tensor noise_;
};
TORCH_MODULE(AutoNormConnection);

}  // namespace spheret::nn
