// A one-layer GPT's logits, loss and gradients against a reference forward written here from
// nanoGPT's model.py and docs/methods.md, reading the module's parameters by name.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <map>
#include <string>

#include "worker/nn/gpt.h"

namespace spheret::nn {
namespace {

using torch::Tensor;

Tensor RefLayerNorm(const Tensor& x, const Tensor& w, const Tensor& b) {
  const Tensor mean = x.mean(-1, true);
  const Tensor var = (x - mean).pow(2).mean(-1, true);
  return (x - mean) / torch::sqrt(var + 1e-5) * w + b;
}

Tensor RefGelu(const Tensor& x) { return 0.5 * x * (1 + torch::erf(x / std::sqrt(2.0))); }

Tensor RefSoftplus(const Tensor& x) { return torch::log1p(torch::exp(x)); }

class Reference {
 public:
  explicit Reference(Gpt& model) {
    for (const auto& item : model->named_parameters()) p_[item.key()] = item.value();
    config_ = model->config();
  }

  Tensor Attention(const Tensor& x, const std::string& prefix) {
    const int64_t b = x.size(0), t = x.size(1), c = x.size(2), nh = config_.n_head, hs = c / nh;
    const Tensor qkv = x.matmul(p_[prefix + "c_attn.weight"].t()) + p_[prefix + "c_attn.bias"];
    auto heads = [&](int64_t i) {
      return qkv.narrow(2, i * c, c).reshape({b, t, nh, hs}).permute({0, 2, 1, 3});
    };
    Tensor att = heads(0).matmul(heads(1).transpose(-2, -1)) / std::sqrt(double(hs));
    const Tensor future = torch::ones({t, t}, torch::kBool).triu(1);
    att = torch::softmax(att.masked_fill(future, -INFINITY), -1);
    const Tensor y = att.matmul(heads(2)).permute({0, 2, 1, 3}).reshape({b, t, c});
    return y.matmul(p_[prefix + "c_proj.weight"].t()) + p_[prefix + "c_proj.bias"];
  }

  Tensor Mlp(const Tensor& x, const std::string& prefix) {
    const Tensor hidden =
        RefGelu(x.matmul(p_[prefix + "c_fc.weight"].t()) + p_[prefix + "c_fc.bias"]);
    return hidden.matmul(p_[prefix + "c_proj.weight"].t()) + p_[prefix + "c_proj.bias"];
  }

  // geonorm's update with alpha = min(softplus(a), 1) * lambda_1 (lambda_1 = 1).
  Tensor GeoNorm(const Tensor& h, const Tensor& f, const Tensor& a) {
    const Tensor alpha = torch::clamp_max(RefSoftplus(a), 1.0);
    const Tensor hh = (h * h).sum(-1, true);
    const Tensor z = f - ((h * f).sum(-1, true) / hh) * h;
    const Tensor nz = z.norm(2, -1, true), nh = hh.sqrt();
    const Tensor theta = torch::clamp_max(alpha * nz / nh, M_PI / 4);
    return torch::cos(theta) * h + nh * torch::sin(theta) * z / nz;
  }

  Tensor Logits(const Tensor& idx, const std::string& method) {
    const int64_t t = idx.size(1);
    Tensor h = p_["wte.weight"].index_select(0, idx.reshape({-1})).reshape({idx.size(0), t, -1}) +
               p_["wpe.weight"].narrow(0, 0, t);
    const std::string block = "blocks.0.";
    if (method == "pre_ln") {
      h = h + Attention(RefLayerNorm(h, p_[block + "conn_attn.norm.weight"],
                                     p_[block + "conn_attn.norm.bias"]),
                        block + "attn.");
      h = h +
          Mlp(RefLayerNorm(h, p_[block + "conn_mlp.norm.weight"], p_[block + "conn_mlp.norm.bias"]),
              block + "mlp.");
    } else {  // geonorm: [ScaleNorm on the embedding], two sphere updates of LN-fed sublayers.
      if (p_.count("embedding_norm.gamma") != 0) {
        const double root = std::sqrt(double(config_.n_embd));
        const Tensor r = torch::clamp(RefSoftplus(p_["embedding_norm.gamma"]), 1.0, root);
        h = r * h / h.norm(2, -1, true);
      }
      const Tensor f_attn = Attention(RefLayerNorm(h, p_[block + "conn_attn.inner_norm.weight"],
                                                   p_[block + "conn_attn.inner_norm.bias"]),
                                      block + "attn.");
      h = GeoNorm(h, f_attn, p_[block + "conn_attn.a"]);
      const Tensor f_mlp = Mlp(RefLayerNorm(h, p_[block + "conn_mlp.inner_norm.weight"],
                                            p_[block + "conn_mlp.inner_norm.bias"]),
                               block + "mlp.");
      h = GeoNorm(h, f_mlp, p_[block + "conn_mlp.a"]);
    }
    h = RefLayerNorm(h, p_["ln_f.weight"], p_["ln_f.bias"]);
    return h.matmul(p_["wte.weight"].t());
  }

 private:
  std::map<std::string, Tensor> p_;
  GptConfig config_;
};

// A one-layer GPT of `method` in float64 (seeded 42), its 1-d parameters and step parameters
// moved off their init (with `scalenorm: true` for the variant geonorm+scalenorm).
Gpt OneLayerModelOffInit(const std::string& variant, const std::string& method) {
  torch::manual_seed(42);
  GptConfig config;
  config.vocab_size = 11;
  config.block_size = 8;
  config.n_layer = 1;
  config.n_head = 2;
  config.n_embd = 12;
  config.connection.method = *ParseMethod(method);
  if (variant == "geonorm+scalenorm") config.connection.scalenorm = true;
  Gpt model(config);
  model->to(torch::kDouble);
  {  // Off the init: biases and norm weights random, the step parameter off its clamp kink.
    torch::NoGradGuard no_grad;
    for (auto& item : model->named_parameters()) {
      if (item.value().dim() == 1) item.value().copy_(torch::randn_like(item.value()) * 0.3 + 1.0);
      if (item.key().size() >= 2 && item.key().substr(item.key().size() - 2) == ".a") {
        item.value().fill_(0.2);
      }
    }
  }
  return model;
}

TEST(GptReferenceTest, OneLayerLogitsLossAndGradientsMatch) {
  // geonorm as the paper's Eq. 3 (no ScaleNorm on the embedding), and with `scalenorm: true`.
  for (const std::string variant : {"pre_ln", "geonorm", "geonorm+scalenorm"}) {
    const std::string method = variant.substr(0, variant.find('+'));
    SCOPED_TRACE(variant);
    Gpt model = OneLayerModelOffInit(variant, method);
    const Tensor idx = torch::randint(11, {3, 8});
    const Tensor targets = torch::randint(11, {3, 8});
    Reference reference(model);

    const Tensor logits = model->forward(idx);
    const Tensor expected = reference.Logits(idx, method);
    EXPECT_TRUE(torch::allclose(logits, expected, 1e-10, 1e-10))
        << method << ": max diff " << (logits - expected).abs().max().item<double>();

    const Tensor loss = model->loss(idx, targets);
    const Tensor ref_loss =
        torch::nll_loss(torch::log_softmax(expected.reshape({-1, 11}), -1), targets.reshape({-1}));
    EXPECT_NEAR(loss.item<double>(), ref_loss.item<double>(), 1e-10) << method;

    std::map<std::string, Tensor> grads;
    loss.backward();
    for (auto& item : model->named_parameters()) {
      grads[item.key()] = item.value().grad().clone();
      item.value().mutable_grad() = Tensor();
    }
    torch::nll_loss(reference.Logits(idx, method).reshape({-1, 11}).log_softmax(-1),
                    targets.reshape({-1}))
        .backward();
    for (auto& item : model->named_parameters()) {
      ASSERT_TRUE(item.value().grad().defined()) << method << " " << item.key();
      EXPECT_TRUE(torch::allclose(grads[item.key()], item.value().grad(), 1e-8, 1e-10))
          << method << " gradient of " << item.key();
    }
  }
}

}  // namespace
}  // namespace spheret::nn
