// Double-precision gradient checks of every connection, parameters included (a and gamma moved off
// their clamp bounds: at the default init they sit on a kink, docs/methods.md §2).
#include "tests/worker/nn/gradcheck.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "worker/nn/connection.h"
#include "worker/nn/norms.h"

namespace spheret::nn {
namespace {

TEST(ConnectionGradcheckTest, EveryMethodInDoublePrecision) {
  torch::manual_seed(11);
  constexpr int64_t kC = 6;
  for (const char* id : {"pre_ln", "post_ln", "pre_dyt", "peri_ln", "keel", "geonorm",
                         "proj_spheret", "cay_spheret", "p_spheret"}) {
    for (bool fused : {true, false}) {
      ConnectionOptions options;
      options.method = *ParseMethod(id);
      options.n_embd = kC;
      options.n_layer = 2;
      options.p = 0.7;
      options.fused = fused;
      Connection connection = MakeConnection(options, {2, 1});
      connection->to(torch::kDouble);
      {
        torch::NoGradGuard no_grad;
        for (auto& item : connection->named_parameters()) {
          // a off its kink (softplus(0) = 0.69 < 1); other parameters random.
          item.value().copy_(item.key() == "a" ? torch::zeros_like(item.value())
                                               : torch::randn_like(item.value()));
        }
      }
      const torch::Tensor w = (torch::randn({kC, kC}, torch::kDouble) * 0.8).requires_grad_();
      const torch::Tensor h = (torch::randn({2, 3, kC}, torch::kDouble) * 2).requires_grad_();
      std::vector<torch::Tensor> inputs = {h, w};
      for (const torch::Tensor& p : connection->parameters()) inputs.push_back(p);
      auto fn = [&] {
        return connection->forward(
            h, [&](const torch::Tensor& x) { return torch::tanh(x.matmul(w.t())) * 2.0; });
      };
      EXPECT_TRUE(testing::GradCheck(fn, inputs)) << id << (fused ? " fused" : " composite");
    }
  }
}

TEST(ConnectionGradcheckTest, EmbeddingScaleNormWithGammaOffItsBounds) {
  ConnectionOptions options;
  options.method = Method::kGeoNorm;
  options.scalenorm = true;  // off by default for geonorm (the paper's Eq. 3 has none)
  options.n_embd = 6;
  torch::nn::AnyModule norm = MakeEmbeddingNorm(options);
  norm.ptr()->to(torch::kDouble);
  torch::Tensor gamma = norm.ptr()->named_parameters()["gamma"];
  {
    torch::NoGradGuard no_grad;
    gamma.fill_(0.9);  // r = softplus(0.9) = 1.24, inside (1, sqrt(6)).
  }
  const torch::Tensor x = torch::randn({2, 3, 6}, torch::kDouble).requires_grad_();
  EXPECT_TRUE(testing::GradCheck([&] { return norm.forward(x); }, {x, gamma}));
}

}  // namespace
}  // namespace spheret::nn
