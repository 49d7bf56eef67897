// Deep connections: the modules that turn (h, F) into the next hidden state, one per sublayer.
//
// A connection owns its norms and step-size parameters and applies F itself, so that it decides
// what F sees (LN(h) for pre_ln, h for post_ln, ...). Build one with MakeConnection; the embedding
// norm (first-layer ScaleNorm of the sphere methods) and the final norm with MakeEmbeddingNorm and
// MakeFinalNorm. All modules are LibTorch modules: parameters register under stable names
// ("ln_in.weight", "a", ...), so checkpoints and optimizer groups see them.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/connection_options.h"

namespace spheret::nn {

// The sublayer F (attention or MLP), called on what the connection feeds it: (B, T, C) -> (B, T,
// C).
using Sublayer = std::function<torch::Tensor(const torch::Tensor&)>;

// Per-sublayer diagnostics, means over the tokens of one forward. Filled only when a sink is
// passed to forward(); nothing is computed otherwise.
struct ConnectionDiagnostics {
  double hidden_norm = 0;       // ||h'|| after the connection.
  double theta = 0;             // Rotation angle: theta of the sphere update, or angle(h, h').
  std::optional<double> alpha;  // alpha_l (sphere methods only).
  double radial = 0;            // |<h,F>| / (||h|| ||F||): the radial share of F.
  // Further values named as diag fields: token_cos and eff_rank (every method), theta2, at_cap
  // and Proposition 6's values (sphere methods), gate_choice and gate_prob (autonorm).
  std::vector<std::pair<std::string, double>> extra;
};

// While one lives on this thread, the modules take their twice-differentiable paths: the sphere
// update as autograd over its formulas (not the fused kernel) and attention by the math kernel,
// so that Jacobian-vector products can run through double backward (worker/nn/jacobian.h).
class CompositeModeGuard {
 public:
  CompositeModeGuard();
  ~CompositeModeGuard();
  CompositeModeGuard(const CompositeModeGuard&) = delete;
  CompositeModeGuard& operator=(const CompositeModeGuard&) = delete;

 private:
  bool previous_;
};
// Whether a CompositeModeGuard is alive on this thread.
bool CompositeMode();

// Appends token_cos and eff_rank of hidden states h (B, T, C) (worker/nn/stability.h) to
// diagnostics->extra.
void RecordTokenCollapse(const torch::Tensor& h, ConnectionDiagnostics* diagnostics);

class LayerNormImpl;

// Connections in a row whose update runs fused with the LayerNorm that follows it (the next
// connection's input norm, or ln_f; worker/nn/norm_fused.h). The caller sets normed_in and next;
// forward() sets normed_out where the connection fused its update with `next`.
struct NormChain {
  torch::Tensor normed_in;              // LN(h) by this connection's input LayerNorm, or undefined
  const LayerNormImpl* next = nullptr;  // the LayerNorm applied to the result next, or null
  torch::Tensor normed_out;             // next(result) when fused, else undefined
};

class ConnectionImpl : public torch::nn::Module {
 public:
  // h: (B, T, C). Returns the next hidden state (B, T, C). `diagnostics` may be null.
  // With `diagnostics`, also the token collapse of the result (token_cos, eff_rank).
  // With `chain`, the connection may take LN(h) from it and fuse its update with chain->next.
  torch::Tensor forward(const torch::Tensor& h, const Sublayer& sublayer,
                        ConnectionDiagnostics* diagnostics = nullptr, NormChain* chain = nullptr) {
    torch::Tensor out = chain != nullptr ? StepChained(h, sublayer, diagnostics, chain)
                                         : Step(h, sublayer, diagnostics);
    if (diagnostics != nullptr) RecordTokenCollapse(out, diagnostics);
    return out;
  }
  // The LayerNorm this connection applies to h before F (its input norm), if it takes a chain's
  // normed_in; null otherwise.
  virtual const LayerNormImpl* input_layer_norm() const { return nullptr; }

 protected:
  virtual torch::Tensor Step(const torch::Tensor& h, const Sublayer& sublayer,
                             ConnectionDiagnostics* diagnostics) = 0;
  // Step within a chain; connections that fuse nothing leave chain->normed_out undefined.
  virtual torch::Tensor StepChained(const torch::Tensor& h, const Sublayer& sublayer,
                                    ConnectionDiagnostics* diagnostics, NormChain* /*chain*/) {
    return Step(h, sublayer, diagnostics);
  }
};
using Connection = std::shared_ptr<ConnectionImpl>;

// The connection of `options.method` at `position`. Precondition:
// ValidateConnectionOptions(options) is "" and position.block is in [1, n_layer], sublayer in {0,
// 1}; a violation throws std::invalid_argument with the same message (as torch's own modules do for
// bad options).
Connection MakeConnection(const ConnectionOptions& options, const SublayerPosition& position);

// The norm on the embedding output: the first-layer ScaleNorm for sphere methods (when
// ScaleNormOn(options)), the unit normalization for ngpt, identity otherwise.
torch::nn::AnyModule MakeEmbeddingNorm(const ConnectionOptions& options);

// ln_f before the LM head: options.final_norm, where LayerNorm means DyT for pre_dyt; none for
// ngpt (its hidden state is already unit, its logits carry the scale s_z).
torch::nn::AnyModule MakeFinalNorm(const ConnectionOptions& options);

}  // namespace spheret::nn
