#include "worker/nn/gpt.h"

#include <torch/torch.h>

#include <cmath>
#include <stdexcept>

namespace spheret::nn {
absl::Status ValidateGptConfig(GptConfig* config) {
  if (config->vocab_size < 1) return absl::InvalidArgumentError("vocab_size must be >= 1");
  if (config->block_size < 1) return absl::InvalidArgumentError("block_size must be >= 1");
  if (config->n_head < 1 || config->n_embd % config->n_head != 0) {
    return absl::InvalidArgumentError("n_embd (" + std::to_string(config->n_embd) +
                                      ") must be a multiple of n_head (" +
                                      std::to_string(config->n_head) + ")");
  }
  if (!(config->dropout >= 0 && config->dropout < 1))
    return absl::InvalidArgumentError("dropout must be in [0, 1)");
  config->connection.n_embd = config->n_embd;
  config->connection.n_layer = config->n_layer;
  config->connection.bias = config->bias;
  return ValidateConnectionOptions(config->connection);
}

CausalSelfAttentionImpl::CausalSelfAttentionImpl(const GptConfig& config)
    : n_head(config.n_head), dropout(config.dropout) {
  const int64_t c = config.n_embd;
  c_attn = register_module("c_attn",
                           torch::nn::Linear(torch::nn::LinearOptions(c, 3 * c).bias(config.bias)));
  c_proj = register_module("c_proj",
                           torch::nn::Linear(torch::nn::LinearOptions(c, c).bias(config.bias)));
}

torch::Tensor CausalSelfAttentionImpl::forward(const torch::Tensor& x) {
  const int64_t b = x.size(0), t = x.size(1), c = x.size(2);
  const std::vector<torch::Tensor> qkv = c_attn(x).split(c, 2);  // 3 x (B, T, C)
  auto heads = [&](const torch::Tensor& y) {
    return y.view({b, t, n_head, c / n_head}).transpose(1, 2);  // (B, nh, T, hs)
  };
  const torch::Tensor y = at::scaled_dot_product_attention(
      heads(qkv[0]), heads(qkv[1]), heads(qkv[2]), /*attn_mask=*/{}, is_training() ? dropout : 0.0,
      /*is_causal=*/true);                                                     // (B, nh, T, hs)
  torch::Tensor out = c_proj(y.transpose(1, 2).contiguous().view({b, t, c}));  // (B, T, C)
  return torch::dropout(out, dropout, is_training());
}

MlpImpl::MlpImpl(const GptConfig& config) : dropout(config.dropout) {
  const int64_t c = config.n_embd;
  c_fc = register_module("c_fc",
                         torch::nn::Linear(torch::nn::LinearOptions(c, 4 * c).bias(config.bias)));
  c_proj = register_module("c_proj",
                           torch::nn::Linear(torch::nn::LinearOptions(4 * c, c).bias(config.bias)));
}

torch::Tensor MlpImpl::forward(const torch::Tensor& x) {
  const torch::Tensor hidden = torch::gelu(c_fc(x));  // (B, T, 4C), exact erf GELU
  return torch::dropout(c_proj(hidden), dropout, is_training());
}

BlockImpl::BlockImpl(const GptConfig& config, int64_t block) {
  attn = register_module("attn", CausalSelfAttention(config));
  mlp = register_module("mlp", Mlp(config));
  conn_attn = register_module("conn_attn", MakeConnection(config.connection, {block, 0}));
  conn_mlp = register_module("conn_mlp", MakeConnection(config.connection, {block, 1}));
}

torch::Tensor BlockImpl::forward(const torch::Tensor& h_in,
                                 std::vector<ConnectionDiagnostics>* diagnostics) {
  ConnectionDiagnostics d_attn, d_mlp;
  const bool want = diagnostics != nullptr;
  torch::Tensor h = conn_attn->forward(
      h_in, [&](const torch::Tensor& x) { return attn(x); }, want ? &d_attn : nullptr);
  h = conn_mlp->forward(
      h, [&](const torch::Tensor& x) { return mlp(x); }, want ? &d_mlp : nullptr);
  if (want) {
    diagnostics->push_back(d_attn);
    diagnostics->push_back(d_mlp);
  }
  return h;
}

GptImpl::GptImpl(GptConfig config) : config_(std::move(config)) {
  const absl::Status error = ValidateGptConfig(&config_);
  if (!error.ok()) throw std::invalid_argument(std::string(error.message()));
  wte = register_module("wte", torch::nn::Embedding(config_.vocab_size, config_.n_embd));
  wpe = register_module("wpe", torch::nn::Embedding(config_.block_size, config_.n_embd));
  embedding_norm = MakeEmbeddingNorm(config_.connection);
  register_module("embedding_norm", embedding_norm.ptr());
  blocks = register_module("blocks", torch::nn::ModuleList());
  for (int64_t l = 1; l <= config_.n_layer; ++l) blocks->push_back(Block(config_, l));
  ln_f = MakeFinalNorm(config_.connection);
  register_module("ln_f", ln_f.ptr());
  InitWeights();
}

void GptImpl::InitWeights() {
  torch::NoGradGuard no_grad;
  const double proj_std = 0.02 / std::sqrt(2.0 * config_.n_layer);
  for (const auto& item : named_parameters()) {
    const std::string& name = item.key();
    torch::Tensor p = item.value();
    const bool is_weight = name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0;
    const bool linear_or_embedding =
        name.find("c_attn.") != std::string::npos || name.find("c_fc.") != std::string::npos ||
        name.find("c_proj.") != std::string::npos || name == "wte.weight" || name == "wpe.weight";
    if (!linear_or_embedding) continue;  // Norm and step parameters keep their own init.
    if (!is_weight) {
      p.zero_();  // Linear biases.
    } else if (name.find("c_proj.weight") != std::string::npos) {
      p.normal_(0.0, proj_std);
    } else {
      p.normal_(0.0, 0.02);
    }
  }
}

torch::Tensor GptImpl::forward(const torch::Tensor& idx,
                               std::vector<ConnectionDiagnostics>* diagnostics) {
  const int64_t t = idx.size(1);
  TORCH_CHECK(t <= config_.block_size, "sequence of length ", t, " exceeds block_size ",
              config_.block_size);
  const torch::Tensor pos = torch::arange(t, idx.options());  // (T)
  torch::Tensor h = wte(idx) + wpe(pos);                      // (B, T, C)
  h = torch::dropout(h, config_.dropout, is_training());
  h = embedding_norm.forward(h);
  for (const auto& block : *blocks) h = block->as<BlockImpl>()->forward(h, diagnostics);
  h = ln_f.forward(h);
  return torch::linear(h, wte->weight);  // (B, T, V), tied head
}

torch::Tensor GptImpl::loss(const torch::Tensor& idx, const torch::Tensor& targets) {
  torch::Tensor logits = forward(idx);  // (B, T, V)
  // The loss in fp32 at least: reduced-precision logits are upcast first.
  if (logits.element_size() < 4) logits = logits.to(torch::kFloat);
  return torch::cross_entropy_loss(logits.view({-1, logits.size(-1)}), targets.view({-1}));
}

int64_t GptImpl::num_parameters(bool non_embedding) const {
  int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  return non_embedding ? n - wpe->weight.numel() : n;
}

}  // namespace spheret::nn
