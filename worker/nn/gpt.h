// nanoGPT's GPT (docs/methods.md §0) with the deep connection chosen by `connection.method`.
//
//   h0 = wte[idx] + wpe[pos]; h = embedding_norm(h0)          (ScaleNorm for sphere methods)
//   per block l: h = conn_attn(h, attn); h = conn_mlp(h, mlp)  (the connection applies F)
//   logits = ln_f(h) @ wte^T                                   (tied, bias-free head)
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
  bool bias = true;
  // Everything about the connection; its n_embd, n_layer and bias are overwritten from the fields
  // above by ValidateGptConfig.
  ConnectionOptions connection;
};

// OK when valid, else InvalidArgument naming the bad field. Copies n_embd/n_layer/bias into
// config->connection first.
absl::Status ValidateGptConfig(GptConfig* config);

class CausalSelfAttentionImpl : public torch::nn::Module {
 public:
  explicit CausalSelfAttentionImpl(const GptConfig& config);
  torch::Tensor forward(const torch::Tensor& x);  // (B, T, C) -> (B, T, C)
  torch::nn::Linear c_attn{nullptr}, c_proj{nullptr};
  int64_t n_head;
  double dropout;
};
TORCH_MODULE(CausalSelfAttention);

class MlpImpl : public torch::nn::Module {
 public:
  explicit MlpImpl(const GptConfig& config);
  torch::Tensor forward(const torch::Tensor& x);  // (B, T, C) -> (B, T, C)
  torch::nn::Linear c_fc{nullptr}, c_proj{nullptr};
  double dropout;
};
TORCH_MODULE(Mlp);

class BlockImpl : public torch::nn::Module {
 public:
  BlockImpl(const GptConfig& config, int64_t block);  // block: 1-based index
  // `diagnostics`, when given, receives two entries: attention then MLP.
  torch::Tensor forward(const torch::Tensor& h, std::vector<ConnectionDiagnostics>* diagnostics);
  CausalSelfAttention attn{nullptr};
  Mlp mlp{nullptr};
  Connection conn_attn, conn_mlp;
};
TORCH_MODULE(Block);

class GptImpl : public torch::nn::Module {
 public:
  // Precondition: ValidateGptConfig(&config) returned "" (else std::invalid_argument).
  explicit GptImpl(GptConfig config);
  // idx: (B, T) int64 token ids, T <= block_size. Returns logits (B, T, vocab_size). When
  // `diagnostics` is given it receives 2 * n_layer entries (block by block, attention then MLP).
  torch::Tensor forward(const torch::Tensor& idx,
                        std::vector<ConnectionDiagnostics>* diagnostics = nullptr);
  // Mean cross-entropy of next-token targets (B, T).
  torch::Tensor loss(const torch::Tensor& idx, const torch::Tensor& targets);
  int64_t num_parameters(bool non_embedding = true) const;
  const GptConfig& config() const { return config_; }

  torch::nn::Embedding wte{nullptr}, wpe{nullptr};
  torch::nn::AnyModule embedding_norm, ln_f;
  torch::nn::ModuleList blocks{nullptr};

 private:
  void InitWeights();
  GptConfig config_;
};
TORCH_MODULE(Gpt);

}  // namespace spheret::nn
