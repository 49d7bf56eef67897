// AutoNorm (docs/methods.md §3): pre-norm whose norm is a choice among
// N = (LayerNorm, RMSNorm, DyT, identity), per sublayer,
//   h <- h + F(sum_i g_i N_i(h))
// autonorm_mode learned: g = softmax((logits + G) / tau) with Gumbel noise G (training only) and
// temperature tau set once per step by the trainer (SetGate), so every shard and rank of a step
// draws the same gate. After Freeze (AutoNorm-S, gate_freeze_step) the gate is the one-hot of the
// argmax at that moment, kept in the buffer `frozen`, and the logits get no gradient.
// autonorm_mode random / random_fixed (the random-selection baseline): no gate parameters; g is
// the one-hot of the candidate the trainer picks (Pick: a uniform draw per step, or one per run),
// kept in the buffer `choice`; before any pick, g is uniform (the draw's expectation).
// Whenever g is one-hot, only the picked candidate is computed.
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
  AutoNormMode mode() const { return mode_; }
  // Learned mode: the gate of the next forwards: temperature > 0 and Gumbel noise (kCandidates)
  // or an undefined tensor for none. Both default to 1 and none.
  void SetGate(double temperature, const torch::Tensor& noise);
  // Learned mode: freezes the gate to the current argmax of the logits (no-op when frozen).
  void Freeze();
  bool frozen() const;  // learned mode, after Freeze
  // Random modes: the candidate of the next forwards, in [0, kCandidates).
  void Pick(int64_t candidate);
  // The candidate the gate picks: the frozen or picked one, else (learned) argmax of the logits;
  // -1 in a random mode before any Pick.
  int64_t choice() const;
  // The gate weights g (kCandidates), differentiable in the logits while learning.
  torch::Tensor gate() const;

  torch::Tensor logits;  // (kCandidates) learnable, init 0 (a uniform gate); learned mode only
  // () int64: the frozen (learned, buffer "frozen") or picked (random, buffer "choice")
  // candidate, -1 while none.
  torch::Tensor picked_index;
  torch::nn::AnyModule layernorm, rmsnorm, dyt;

 protected:
  torch::Tensor Step(const torch::Tensor& h, const Sublayer& sublayer,
                     ConnectionDiagnostics* diagnostics) override;

 private:
  int64_t picked() const { return picked_index.item<int64_t>(); }
  // The top probability of the gate's distribution: softmax(logits / tau) while learning, 1 when
  // frozen or fixed, 1 / kCandidates for the per-step draw.
  double TopProbability() const;

  AutoNormMode mode_;
  double temperature_ = 1.0;
  torch::Tensor noise_;
};
TORCH_MODULE(AutoNormConnection);

// `count` candidates, each uniform over [0, kCandidates), from a CPU generator seeded with
// `seed`: (count) int64, the same for the same seed on every machine and thread.
torch::Tensor DrawGateChoices(uint64_t seed, int64_t count);

}  // namespace spheret::nn
