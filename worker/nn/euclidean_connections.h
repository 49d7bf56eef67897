// The Euclidean baselines of docs/methods.md §1 (one sublayer step each):
//   pre_ln  h + F(LN(h))          pre_dyt  h + F(DyT(h))
//   post_ln LN(h + F(h))          peri_ln  h + LN_out(F(LN_in(h)))
//   keel    LN_post(k h + F(LN_in(h))), k = 2L
#pragma once

#include "worker/nn/connection.h"

namespace spheret::nn {

// Fills `diagnostics` (when given) from the input h, the sublayer output f and the result:
// ||out||, the angle between h and out, no alpha, the radial share of f. Means over tokens.
void MeasureConnection(const torch::Tensor& h, const torch::Tensor& f, const torch::Tensor& out,
                       ConnectionDiagnostics* diagnostics);

// h + F(norm(h)) with norm = LayerNorm (pre_ln) or DyT (pre_dyt).
class PreNormConnectionImpl : public ConnectionImpl {
 public:
  explicit PreNormConnectionImpl(const ConnectionOptions& options);
  const LayerNormImpl* input_layer_norm() const override;  // null for pre_dyt's DyT
  torch::nn::AnyModule norm;

 protected:
  torch::Tensor Step(const torch::Tensor& h, const Sublayer& sublayer,
                     ConnectionDiagnostics* diagnostics) override;
  // h + F fused with chain->next (AddLayerNormFused) when given.
  torch::Tensor StepChained(const torch::Tensor& h, const Sublayer& sublayer,
                            ConnectionDiagnostics* diagnostics, NormChain* chain) override;
};

class PostLnConnectionImpl : public ConnectionImpl {
 public:
  explicit PostLnConnectionImpl(const ConnectionOptions& options);
  torch::nn::AnyModule ln;

 protected:
  torch::Tensor Step(const torch::Tensor& h, const Sublayer& sublayer,
                     ConnectionDiagnostics* diagnostics) override;
};

class PeriLnConnectionImpl : public ConnectionImpl {
 public:
  explicit PeriLnConnectionImpl(const ConnectionOptions& options);
  torch::nn::AnyModule ln_in, ln_out;

 protected:
  torch::Tensor Step(const torch::Tensor& h, const Sublayer& sublayer,
                     ConnectionDiagnostics* diagnostics) override;
};

class KeelConnectionImpl : public ConnectionImpl {
 public:
  explicit KeelConnectionImpl(const ConnectionOptions& options);
  torch::nn::AnyModule ln_in, ln_post;
  double k;  // 2L, the number of sublayers.
 protected:
  torch::Tensor Step(const torch::Tensor& h, const Sublayer& sublayer,
                     ConnectionDiagnostics* diagnostics) override;
};

}  // namespace spheret::nn
