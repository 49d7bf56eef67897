// nanoGPT's GPT (docs/methods.md §0) with the deep connection chosen by `connection.method`.
//
//   h0 = wte[idx] + wpe[pos]; h = embedding_norm(h0)          (ScaleNorm for sphere methods)
//   per block l: h = conn_attn(h, attn); h = conn_mlp(h, mlp)  (the connection applies F)
//   (the stack of blocks `loops` times, the same weights each time: a looped model, with
//    inter_loop_norm applied to h between two loops)
//   logits = ln_f(h) @ wte^T                                   (tied, bias-free head)
// pos_encoding rope: no wpe; q and k rotated per head in attention (worker/nn/rope.h).
// ngpt (worker/nn/ngpt.h): no biases, the embedding output unit-normalized, attention with
// s_qk * n(q), s_qk * n(k) and softmax scale sqrt(hs), a SwiGLU MLP (hidden 4C) scaled by s_u and
// s_nu * sqrt(C), no ln_f, and an untied head lm_head with logits scaled by s_z.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "config/scale_presets.h"
#include "worker/nn/connection.h"

namespace spheret::nn {

struct GptConfig {
  int64_t vocab_size = 50304;
  int64_t block_size = 1024;
  int64_t n_layer = 12;
  int64_t n_head = 12;
  int64_t n_embd = 768;
  double dropout = 0.0;
  bool bias = true;  // must be false for ngpt (nGPT has no biases)
  // Positions: learned wpe (nanoGPT) or rotary embeddings on q and k (an even head size).
  PosEncoding pos_encoding = PosEncoding::kLearned;
  // Everything about the connection; its n_embd, n_layer and bias are overwritten from the fields
  // above by ValidateGptConfig.
  ConnectionOptions connection;
  // Looped model: the n_layer blocks applied `loops` times (docs/methods.md §3). per_loop_loss:
  // objective() sums every loop's readout CE, weighted by loop_loss_weights (one per loop; empty =
  // all 1). norm_penalty: lambda of mean_k mean_tokens (ln ||h_k|| - ln ||h_0||)^2.
  // inter_loop_norm: applied to h between loop k and k + 1 (not after the last): a LayerNorm or
  // RMSNorm shared by every boundary (`loop_norm`), or sphere: ||h_0|| h / ||h|| per token.
  int64_t loops = 1;
  bool per_loop_loss = false;
  std::vector<double> loop_loss_weights;
  double norm_penalty = 0.0;
  InterLoopNorm inter_loop_norm = InterLoopNorm::kNone;
  // Each connection's update fused with the LayerNorm after it (the next connection's input norm,
  // or ln_f) where both allow it (worker/nn/norm_fused.h); false runs them one op after the other.
  bool fused_norm = true;
  // Causal attention as one function from c_attn's output where it allows it (CPU, fp32 or fp64,
  // T <= 256, no dropout, no rope, not ngpt, and a gradient to compute:
  // worker/nn/attention_fused.h); false, and a forward without gradients, run
  // scaled_dot_product_attention on the split heads.
  bool fused_attention = true;
  // The MLP's bias add and GELU as one function where it allows it (CPU fp32 with AVX-512, a bias,
  // not ngpt: worker/nn/gelu_fused.h); false runs c_fc with its bias, then torch::gelu.
  bool fused_mlp = true;
};

class AutoNormConnectionImpl;

// What hidden() records of one forward besides its result.
struct ForwardRecord {
  // When set, receives 2 * n_layer * loops entries in depth order (attention then MLP).
  std::vector<ConnectionDiagnostics>* diagnostics = nullptr;
  bool keep_block_inputs = false;           // fill block_inputs
  torch::Tensor embedded;                   // h_0: the embedding output after embedding_norm
  std::vector<torch::Tensor> loop_states;   // h after each loop (before any inter-loop norm)
  std::vector<torch::Tensor> block_inputs;  // the input of each block application, depth order
};

// OK when valid, else InvalidArgument naming the bad field. Copies n_embd/n_layer/bias into
// config->connection first.
absl::Status ValidateGptConfig(GptConfig* config);

// Causal self-attention; q and k rotated when pos_encoding is rope; for ngpt q and k are
// s_qk * n(.) per head and the softmax scale is sqrt(hs) (else 1/sqrt(hs)).
class CausalSelfAttentionImpl : public torch::nn::Module {
 public:
  explicit CausalSelfAttentionImpl(const GptConfig& config);
  torch::Tensor forward(const torch::Tensor& x);  // (B, T, C) -> (B, T, C)
  // ngpt's effective s_qk (C, head by head), differentiable; undefined for other methods.
  torch::Tensor s_qk_effective() const;
  torch::nn::Linear c_attn{nullptr}, c_proj{nullptr};
  torch::Tensor s_qk;  // ngpt: (C) stored at 1/sqrt(C), head h's scale is [h*hs, (h+1)*hs)
  double s_qk_factor = 1.0;
  int64_t n_head;
  double dropout;
  bool rope;
  bool fused;  // GptConfig::fused_attention
};
TORCH_MODULE(CausalSelfAttention);

// nanoGPT's MLP, c_proj(GELU(c_fc(x))) with hidden 4C; for ngpt the SwiGLU of nGPT: c_fc gives
// u and nu (4C each, c_fc is C -> 8C) and c_proj(u * SiLU(nu)) after the s_u, s_nu scalings.
class MlpImpl : public torch::nn::Module {
 public:
  explicit MlpImpl(const GptConfig& config);
  torch::Tensor forward(const torch::Tensor& x);  // (B, T, C) -> (B, T, C)
  torch::nn::Linear c_fc{nullptr}, c_proj{nullptr};
  torch::Tensor s_u, s_nu;  // ngpt: (4C) each, stored at 1; undefined otherwise
  int64_t n_embd;
  double dropout;
  bool fused;  // GptConfig::fused_mlp
};
TORCH_MODULE(Mlp);

class BlockImpl : public torch::nn::Module {
 public:
  BlockImpl(const GptConfig& config, int64_t block);  // block: 1-based index
  // `diagnostics`, when given, receives two entries: attention then MLP. With `chain`, the block's
  // connections run as a chain (NormChain): chain->normed_in is LN(h) for conn_attn (or
  // undefined), chain->next the LayerNorm after the block; chain->normed_out is set when fused.
  torch::Tensor forward(const torch::Tensor& h, std::vector<ConnectionDiagnostics>* diagnostics,
                        NormChain* chain = nullptr);
  CausalSelfAttention attn{nullptr};
  Mlp mlp{nullptr};
  Connection conn_attn, conn_mlp;
};
TORCH_MODULE(Block);

class GptImpl : public torch::nn::Module {
 public:
  // Precondition: ValidateGptConfig(&config) returned "" (else std::invalid_argument).
  explicit GptImpl(GptConfig config);
  // idx: (B, T) int64 token ids, T <= block_size. Returns logits (B, T, vocab_size) of the last
  // loop. When `diagnostics` is given it receives 2 * n_layer * loops entries (block by block
  // over the loops, attention then MLP).
  torch::Tensor forward(const torch::Tensor& idx,
                        std::vector<ConnectionDiagnostics>* diagnostics = nullptr);
  // The last hidden state (B, T, C) before the readout; `record` may be null.
  torch::Tensor hidden(const torch::Tensor& idx, ForwardRecord* record = nullptr);
  // The readout of a hidden state: ln_f and the tied head; for ngpt lm_head and s_z. (B, T, V).
  // `normed`, when defined, is ln_f(h) already computed (by the last connection's fused update).
  torch::Tensor head(const torch::Tensor& h, const torch::Tensor& normed = {});
  // Mean cross-entropy of next-token targets (B, T) under the last loop's readout.
  torch::Tensor loss(const torch::Tensor& idx, const torch::Tensor& targets);
  // The CE of each exit, 1-D (loops): the readout of h after loop k, k = 1..loops (the last one
  // is loss()).
  torch::Tensor exit_losses(const torch::Tensor& idx, const torch::Tensor& targets);
  // What training minimizes, 1-D: [objective, CE of each loop's readout] with per_loop_loss,
  // else [objective, CE of the last readout]. The objective adds the norm penalty.
  torch::Tensor objective(const torch::Tensor& idx, const torch::Tensor& targets);
  // After every optimizer step (and at init): ngpt's weight normalization; a no-op otherwise.
  void NormalizeWeights();
  // The AutoNorm connections, in depth order (empty for other methods).
  std::vector<AutoNormConnectionImpl*> gates();
  BlockImpl& block_at(int64_t index) { return *blocks[index]->as<BlockImpl>(); }  // 0-based
  // With non_embedding, less the embeddings that are not the head: wpe, and wte when the head
  // is untied (ngpt), as nanoGPT counts.
  int64_t num_parameters(bool non_embedding = true) const;
  const GptConfig& config() const { return config_; }
  // h entering loop k + 1 from h after loop k (inter_loop_norm); h0 is the stack's input
  // (B, T, C), the embedding norm's output.
  torch::Tensor InterLoop(const torch::Tensor& h, const torch::Tensor& h0);

  torch::nn::Embedding wte{nullptr}, wpe{nullptr};  // wpe: null with rope
  torch::nn::AnyModule embedding_norm, ln_f;
  torch::nn::AnyModule loop_norm;  // inter_loop_norm layernorm / rmsnorm (loops > 1); else empty
  torch::nn::ModuleList blocks{nullptr};
  torch::nn::Linear lm_head{nullptr};  // ngpt's untied E_output (C -> V, no bias); null otherwise
  torch::Tensor s_z;  // ngpt's logit scale (V), stored at 1/sqrt(C); undefined otherwise

 private:
  void InitWeights();
  // hidden(); with `final_normed`, the last connection may fuse ln_f and leave ln_f(h) there.
  torch::Tensor Hidden(const torch::Tensor& idx, ForwardRecord* record,
                       torch::Tensor* final_normed);
  // The LayerNorm the stack's connection after block `index` (0-based) of loop `loop` feeds into,
  // when the chain may fuse it: the next block's input LayerNorm, or ln_f after the last block of
  // the last loop (when `final` is wanted). Null otherwise.
  const LayerNormImpl* NextNorm(int64_t loop, int64_t index, bool final);
  GptConfig config_;
};
TORCH_MODULE(Gpt);

}  // namespace spheret::nn
