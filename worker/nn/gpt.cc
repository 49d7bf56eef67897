#include "worker/nn/gpt.h"

#include <torch/torch.h>

#include <cmath>
#include <stdexcept>

#include "worker/nn/attention_fused.h"
#include "worker/nn/autonorm.h"
#include "worker/nn/gelu_fused.h"
#include "worker/nn/linear.h"
#include "worker/nn/ngpt.h"
#include "worker/nn/norms.h"
#include "worker/nn/rope.h"

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
  if (config->loops < 1) return absl::InvalidArgumentError("loops must be >= 1");
  if (config->bias && config->connection.method == Method::kNgpt)
    return absl::InvalidArgumentError("bias must be false for method ngpt (nGPT has no biases)");
  if (config->pos_encoding == PosEncoding::kRope && (config->n_embd / config->n_head) % 2 != 0) {
    return absl::InvalidArgumentError(
        "pos_encoding rope needs an even head size n_embd / n_head, got " +
        std::to_string(config->n_embd / config->n_head));
  }
  if (config->inter_loop_norm != InterLoopNorm::kNone && config->loops < 2) {
    return absl::InvalidArgumentError("inter_loop_norm needs loops >= 2");
  }
  if (!config->loop_loss_weights.empty() &&
      static_cast<int64_t>(config->loop_loss_weights.size()) != config->loops) {
    return absl::InvalidArgumentError("loop_loss_weights must have one weight per loop");
  }
  config->connection.n_embd = config->n_embd;
  config->connection.n_layer = config->n_layer;
  config->connection.bias = config->bias;
  return ValidateConnectionOptions(config->connection);
}

CausalSelfAttentionImpl::CausalSelfAttentionImpl(const GptConfig& config)
    : n_head(config.n_head),
      dropout(config.dropout),
      rope(config.pos_encoding == PosEncoding::kRope),
      fused(config.fused_attention) {
  const int64_t c = config.n_embd;
  c_attn = register_module("c_attn",
                           torch::nn::Linear(torch::nn::LinearOptions(c, 3 * c).bias(config.bias)));
  c_proj = register_module("c_proj",
                           torch::nn::Linear(torch::nn::LinearOptions(c, c).bias(config.bias)));
  if (config.connection.method == Method::kNgpt) {
    const NgptScaling scaling = NgptQkScaling(c);
    s_qk_factor = scaling.factor();
    s_qk = register_parameter("s_qk", torch::full({c}, scaling.scale));
  }
}

torch::Tensor CausalSelfAttentionImpl::s_qk_effective() const { return s_qk * s_qk_factor; }

torch::Tensor CausalSelfAttentionImpl::forward(const torch::Tensor& x) {
  const int64_t b = x.size(0), t = x.size(1), c = x.size(2), hs = c / n_head;
  const double p = is_training() ? dropout : 0.0;
  const torch::Tensor packed = LinearLayer(c_attn, x);  // (B, T, 3C)
  // Fused where it is differentiated (training): a forward alone (evaluation, sampling) runs SDPA,
  // which was faster there (docs/performance.md).
  if (fused && !rope && !s_qk.defined() && p == 0.0 && !CompositeMode() &&
      torch::GradMode::is_enabled() && packed.requires_grad() && AttentionFusable(packed, n_head)) {
    return torch::dropout(LinearLayer(c_proj, CausalAttentionFused(packed, n_head)), dropout,
                          is_training());
  }
  const std::vector<torch::Tensor> qkv = packed.split(c, 2);  // 3 x (B, T, C)
  auto heads = [&](const torch::Tensor& y) {
    return y.view({b, t, n_head, hs}).transpose(1, 2);  // (B, nh, T, hs)
  };
  torch::Tensor q = rope ? ApplyRope(heads(qkv[0])) : heads(qkv[0]);
  torch::Tensor k = rope ? ApplyRope(heads(qkv[1])) : heads(qkv[1]);
  const torch::Tensor v = heads(qkv[2]);
  std::optional<double> scale;  // unset: 1/sqrt(hs)
  if (s_qk.defined()) {
    const torch::Tensor s = s_qk_effective().view({n_head, 1, hs});  // (nh, 1, hs)
    q = NgptQueryKey(q, s).to(v.scalar_type());
    k = NgptQueryKey(k, s).to(v.scalar_type());
    scale = std::sqrt(static_cast<double>(hs));
  }
  // The math kernel in composite mode: the fused kernels' backward is not differentiable.
  const torch::Tensor y =
      CompositeMode()
          ? std::get<0>(at::_scaled_dot_product_attention_math(q, k, v, {}, p, true, {}, scale))
          : at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, p, /*is_causal=*/true,
                                             scale);  // (B, nh, T, hs)
  torch::Tensor out = LinearLayer(c_proj, y.transpose(1, 2).contiguous().view({b, t, c}));
  return torch::dropout(out, dropout, is_training());
}

MlpImpl::MlpImpl(const GptConfig& config)
    : n_embd(config.n_embd), dropout(config.dropout), fused(config.fused_mlp) {
  const int64_t c = config.n_embd;
  const bool swiglu = config.connection.method == Method::kNgpt;  // u and nu: 4C each
  const auto fc_options = torch::nn::LinearOptions(c, (swiglu ? 8 : 4) * c).bias(config.bias);
  c_fc = register_module("c_fc", torch::nn::Linear(fc_options));
  c_proj = register_module("c_proj",
                           torch::nn::Linear(torch::nn::LinearOptions(4 * c, c).bias(config.bias)));
  if (swiglu) {
    const NgptScaling scaling = NgptUvScaling();
    s_u = register_parameter("s_u", torch::full({4 * c}, scaling.scale));
    s_nu = register_parameter("s_nu", torch::full({4 * c}, scaling.scale));
  }
}

torch::Tensor MlpImpl::forward(const torch::Tensor& x) {
  torch::Tensor out;  // (B, T, C)
  if (s_u.defined()) {
    const std::vector<torch::Tensor> u_nu = LinearLayer(c_fc, x).chunk(2, -1);  // 2 x (B, T, 4C)
    const double factor = NgptUvScaling().factor();
    out = LinearLayer(c_proj, NgptSwiGlu(u_nu[0], u_nu[1], s_u * factor, s_nu * factor, n_embd));
  } else if (fused && c_fc->bias.defined() && !CompositeMode()) {  // c_fc's product, GELU: one op
    out = LinearLayer(c_proj, LinearGelu(x, c_fc->weight, c_fc->bias));
  } else {
    out = LinearLayer(c_proj, torch::gelu(LinearLayer(c_fc, x)));  // the exact erf GELU
  }
  return torch::dropout(out, dropout, is_training());
}

BlockImpl::BlockImpl(const GptConfig& config, int64_t block) {
  attn = register_module("attn", CausalSelfAttention(config));
  mlp = register_module("mlp", Mlp(config));
  conn_attn = register_module("conn_attn", MakeConnection(config.connection, {block, 0}));
  conn_mlp = register_module("conn_mlp", MakeConnection(config.connection, {block, 1}));
}

torch::Tensor BlockImpl::forward(const torch::Tensor& h_in,
                                 std::vector<ConnectionDiagnostics>* diagnostics,
                                 NormChain* chain) {
  ConnectionDiagnostics d_attn, d_mlp;
  const bool want = diagnostics != nullptr;
  NormChain first, second;  // conn_attn's and conn_mlp's links of `chain`
  if (chain != nullptr) {
    first.normed_in = chain->normed_in;
    first.next = conn_mlp->input_layer_norm();
  }
  torch::Tensor h = conn_attn->forward(
      h_in, [&](const torch::Tensor& x) { return attn(x); }, want ? &d_attn : nullptr,
      chain != nullptr ? &first : nullptr);
  if (chain != nullptr) {
    second.normed_in = first.normed_out;
    second.next = chain->next;
  }
  h = conn_mlp->forward(
      h, [&](const torch::Tensor& x) { return mlp(x); }, want ? &d_mlp : nullptr,
      chain != nullptr ? &second : nullptr);
  if (chain != nullptr) chain->normed_out = second.normed_out;
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
  if (config_.pos_encoding == PosEncoding::kLearned)
    wpe = register_module("wpe", torch::nn::Embedding(config_.block_size, config_.n_embd));
  embedding_norm = MakeEmbeddingNorm(config_.connection);
  register_module("embedding_norm", embedding_norm.ptr());
  blocks = register_module("blocks", torch::nn::ModuleList());
  for (int64_t l = 1; l <= config_.n_layer; ++l) blocks->push_back(Block(config_, l));
  ln_f = MakeFinalNorm(config_.connection);
  register_module("ln_f", ln_f.ptr());
  if (config_.inter_loop_norm == InterLoopNorm::kLayerNorm ||
      config_.inter_loop_norm == InterLoopNorm::kRmsNorm) {
    // One module for every boundary: the loop stays one map applied K times, and a model can run
    // more loops than it trained with.
    loop_norm = MakeNorm(config_.inter_loop_norm == InterLoopNorm::kLayerNorm ? NormKind::kLayerNorm
                                                                              : NormKind::kRmsNorm,
                         config_.n_embd, config_.bias);
    register_module("loop_norm", loop_norm.ptr());
  }
  if (config_.connection.method == Method::kNgpt) {
    lm_head = register_module(
        "lm_head", torch::nn::Linear(
                       torch::nn::LinearOptions(config_.n_embd, config_.vocab_size).bias(false)));
    s_z = register_parameter(
        "s_z", torch::full({config_.vocab_size}, NgptLogitScaling(config_.n_embd).scale));
  }
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
        name.find("c_proj.") != std::string::npos || name == "wte.weight" || name == "wpe.weight" ||
        name == "lm_head.weight";
    if (!linear_or_embedding) continue;  // Norm and step parameters keep their own init.
    if (!is_weight) {
      p.zero_();  // Linear biases.
    } else if (name.find("c_proj.weight") != std::string::npos) {
      p.normal_(0.0, proj_std);
    } else {
      p.normal_(0.0, 0.02);
    }
  }
  NormalizeWeights();
}

void GptImpl::NormalizeWeights() {
  if (config_.connection.method == Method::kNgpt) NormalizeNgptWeights(*this);
}

std::vector<AutoNormConnectionImpl*> GptImpl::gates() {
  std::vector<AutoNormConnectionImpl*> found;
  for (const auto& block : *blocks) {
    for (const Connection& c :
         {block->as<BlockImpl>()->conn_attn, block->as<BlockImpl>()->conn_mlp}) {
      if (auto* gate = dynamic_cast<AutoNormConnectionImpl*>(c.get())) found.push_back(gate);
    }
  }
  return found;
}

torch::Tensor GptImpl::hidden(const torch::Tensor& idx, ForwardRecord* record) {
  return Hidden(idx, record, nullptr);
}

const LayerNormImpl* GptImpl::NextNorm(int64_t loop, int64_t index, bool final) {
  if (index + 1 < static_cast<int64_t>(blocks->size())) {
    return block_at(index + 1).conn_attn->input_layer_norm();
  }
  if (!final || loop + 1 < config_.loops) return nullptr;
  return dynamic_cast<const LayerNormImpl*>(ln_f.ptr().get());
}

torch::Tensor GptImpl::Hidden(const torch::Tensor& idx, ForwardRecord* record,
                              torch::Tensor* final_normed) {
  const int64_t t = idx.size(1);
  TORCH_CHECK(t <= config_.block_size, "sequence of length ", t, " exceeds block_size ",
              config_.block_size);
  torch::Tensor h = wte(idx);                             // (B, T, C)
  if (wpe) h = h + wpe(torch::arange(t, idx.options()));  // rope: in attention
  h = torch::dropout(h, config_.dropout, is_training());
  h = embedding_norm.forward(h);
  std::vector<ConnectionDiagnostics>* diagnostics = record ? record->diagnostics : nullptr;
  if (record != nullptr) record->embedded = h;
  const torch::Tensor h0 = h;  // (B, T, C), the stack's input
  const bool chained = config_.fused_norm && !CompositeMode();
  for (int64_t loop = 0; loop < config_.loops; ++loop) {
    if (loop > 0) h = InterLoop(h, h0);
    NormChain chain;  // LN(h) passes from one block to the next when fused
    for (int64_t index = 0; index < static_cast<int64_t>(blocks->size()); ++index) {
      if (record != nullptr && record->keep_block_inputs) record->block_inputs.push_back(h);
      chain.next = chained ? NextNorm(loop, index, final_normed != nullptr) : nullptr;
      chain.normed_out = torch::Tensor();
      h = block_at(index).forward(h, diagnostics, chained ? &chain : nullptr);
      chain.normed_in = chain.normed_out;
    }
    if (record != nullptr) record->loop_states.push_back(h);
    if (final_normed != nullptr && loop + 1 == config_.loops) *final_normed = chain.normed_in;
  }
  return h;
}

torch::Tensor GptImpl::InterLoop(const torch::Tensor& h, const torch::Tensor& h0) {
  switch (config_.inter_loop_norm) {
    case InterLoopNorm::kNone:
      return h;
    case InterLoopNorm::kSphere: {
      // r0 = ||h_0|| per token, in at least fp32 as ScaleNormFunction's own norm.
      const torch::Tensor wide = h0.scalar_type() == torch::kDouble ? h0 : h0.to(torch::kFloat);
      const torch::Tensor r0 = wide.square().sum(-1, /*keepdim=*/true).clamp_min(1e-12).sqrt();
      return ScaleNormFunction(h, r0);  // r0 h / ||h||: (B, T, C)
    }
    case InterLoopNorm::kLayerNorm:
    case InterLoopNorm::kRmsNorm:
      break;
  }
  return loop_norm.forward(h);
}

torch::Tensor GptImpl::head(const torch::Tensor& h, const torch::Tensor& normed) {
  const torch::Tensor& head_weight = lm_head ? lm_head->weight : wte->weight;  // (V, C)
  torch::Tensor logits =
      Linear(normed.defined() ? normed : ln_f.forward(h), head_weight, {});  // (B, T, V)
  if (s_z.defined()) logits = logits * (s_z * NgptLogitScaling(config_.n_embd).factor());
  return logits;
}

torch::Tensor GptImpl::forward(const torch::Tensor& idx,
                               std::vector<ConnectionDiagnostics>* diagnostics) {
  ForwardRecord record;
  record.diagnostics = diagnostics;
  torch::Tensor normed;  // ln_f(h) when the last connection fused it
  const torch::Tensor h = Hidden(idx, diagnostics ? &record : nullptr, &normed);
  return head(h, normed);
}

namespace {

// Mean cross-entropy in fp32 at least: reduced-precision logits are upcast first.
torch::Tensor CrossEntropy(torch::Tensor logits, const torch::Tensor& targets) {
  if (logits.element_size() < 4) logits = logits.to(torch::kFloat);
  return torch::cross_entropy_loss(logits.view({-1, logits.size(-1)}), targets.view({-1}));
}

}  // namespace

torch::Tensor GptImpl::loss(const torch::Tensor& idx, const torch::Tensor& targets) {
  return CrossEntropy(forward(idx), targets);
}

torch::Tensor GptImpl::exit_losses(const torch::Tensor& idx, const torch::Tensor& targets) {
  ForwardRecord record;
  hidden(idx, &record);
  std::vector<torch::Tensor> losses;
  for (const torch::Tensor& state : record.loop_states) {
    losses.push_back(CrossEntropy(head(state), targets));
  }
  return torch::stack(losses);  // (loops)
}

torch::Tensor GptImpl::objective(const torch::Tensor& idx, const torch::Tensor& targets) {
  ForwardRecord record;
  torch::Tensor normed;  // ln_f(h) when the last connection fused it
  const torch::Tensor h = Hidden(idx, &record, &normed);
  std::vector<torch::Tensor> terms(1);
  torch::Tensor objective;
  if (config_.per_loop_loss) {
    for (int64_t k = 0; k < config_.loops; ++k) {
      const double weight = config_.loop_loss_weights.empty() ? 1.0 : config_.loop_loss_weights[k];
      const bool last = k + 1 == config_.loops;
      terms.push_back(
          CrossEntropy(head(record.loop_states[k], last ? normed : torch::Tensor()), targets));
      objective = k == 0 ? weight * terms.back() : objective + weight * terms.back();
    }
  } else {
    terms.push_back(CrossEntropy(head(h, normed), targets));
    objective = terms.back();
  }
  if (config_.norm_penalty > 0) {
    // ln ||h|| in at least fp32.
    auto log_norm = [](const torch::Tensor& h) {
      const torch::Tensor wide = h.element_size() < 4 ? h.to(torch::kFloat) : h;
      return wide.norm(2, -1).clamp_min(1e-12).log();
    };
    const torch::Tensor log_h0 = log_norm(record.embedded);
    torch::Tensor drift = torch::zeros({}, objective.options());
    for (const torch::Tensor& state : record.loop_states) {
      drift = drift + (log_norm(state) - log_h0).pow(2).mean();
    }
    objective = objective + config_.norm_penalty * drift / static_cast<double>(config_.loops);
  }
  terms[0] = objective;
  return torch::stack(terms);
}

int64_t GptImpl::num_parameters(bool non_embedding) const {
  int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  if (!non_embedding) return n;
  if (wpe) n -= wpe->weight.numel();
  if (lm_head) n -= wte->weight.numel();
  return n;
}

}  // namespace spheret::nn
