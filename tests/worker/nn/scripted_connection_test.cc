// Method scripted (worker/nn/scripted_connection.h): a TorchScript module per sublayer, its
// tensors on the connection. The modules here are TorchScript defined from C++ (the same format
// torch.jit.script writes); tests/worker/lm/scripted_connection_test.py trains Python-scripted
// ones end to end.
#include "worker/nn/scripted_connection.h"

#include <gtest/gtest.h>
#include <torch/script.h>
#include <torch/torch.h>

#include <sstream>
#include <stdexcept>
#include <string>

namespace spheret::nn {
namespace {

// The bytes of a TorchScript module with `forward` from `source` and the parameters `alpha`
// (scalar, 0) and `inner.gain` (C ones, in a submodule).
std::string ScriptBytes(const std::string& forward, int64_t c = 8) {
  torch::jit::Module inner("Inner");
  inner.register_parameter("gain", torch::ones({c}).requires_grad_(), false);
  torch::jit::Module module("Connection");
  module.register_parameter("alpha", torch::zeros({}).requires_grad_(), false);
  module.register_module("inner", inner);
  module.define(forward);
  std::ostringstream out;
  module.save(out);
  return out.str();
}

const char* const kReZero = R"(
def forward(self, h: Tensor, f: Tensor, index: int, count: int) -> Tensor:
    return h + self.alpha * self.inner.gain * f
)";

ConnectionOptions Scripted(const std::string& bytes, int64_t c = 8, int64_t n_layer = 3) {
  ConnectionOptions options;
  options.method = Method::kScripted;
  options.n_embd = c;
  options.n_layer = n_layer;
  options.script = bytes;
  return options;
}

Sublayer Doubling() {
  return [](const torch::Tensor& x) { return 2 * x; };
}

TEST(ScriptedConnectionTest, EachSublayerOwnsItsCopyOfTheParametersUnderStableNames) {
  const ConnectionOptions options = Scripted(ScriptBytes(kReZero));
  Connection first = MakeConnection(options, {1, 0});
  Connection second = MakeConnection(options, {1, 1});
  const auto names = first->named_parameters().keys();
  EXPECT_EQ(names, (std::vector<std::string>{"script_alpha", "script_inner_gain", "norm.weight",
                                             "norm.bias"}));
  torch::Tensor alpha = first->named_parameters()["script_alpha"];
  {
    torch::NoGradGuard no_grad;
    alpha.fill_(0.5);  // as an optimizer step does, in place
  }
  EXPECT_EQ(second->named_parameters()["script_alpha"].item<float>(), 0.0f);
  const torch::Tensor h = torch::randn({2, 3, 8});
  // The script reads the tensor the optimizer changed: h + 0.5 * 2 * LN(h).
  const torch::Tensor ln = torch::layer_norm(h, {8});
  EXPECT_TRUE(torch::allclose(first->forward(h, Doubling()), h + ln, 1e-6, 1e-6));
  EXPECT_TRUE(torch::equal(second->forward(h, Doubling()), h));
}

TEST(ScriptedConnectionTest, GradientsReachTheScriptsParameters) {
  Connection connection = MakeConnection(Scripted(ScriptBytes(kReZero)), {2, 1});
  const torch::Tensor h = torch::randn({2, 3, 8});
  connection->forward(h, Doubling()).sum().backward();
  const torch::Tensor grad = connection->named_parameters()["script_alpha"].grad();
  ASSERT_TRUE(grad.defined());
  EXPECT_NEAR(grad.item<double>(), (2 * torch::layer_norm(h, {8})).sum().item<double>(), 1e-3);
}

TEST(ScriptedConnectionTest, ForwardGetsTheUpdatesPlaceAndCount) {
  const std::string bytes = ScriptBytes(R"(
def forward(self, h: Tensor, f: Tensor, index: int, count: int) -> Tensor:
    return h * 0.0 + float(index) / float(count)
)");
  const torch::Tensor h = torch::randn({1, 2, 8});
  for (const auto& [block, sublayer, index] :
       {std::tuple{1, 0, 1}, std::tuple{1, 1, 2}, std::tuple{3, 0, 5}, std::tuple{3, 1, 6}}) {
    Connection connection = MakeConnection(Scripted(bytes), {block, sublayer});
    const double value = connection->forward(h, Doubling()).mean().item<double>();
    EXPECT_NEAR(value, index / 6.0, 1e-6) << "block " << block << " sublayer " << sublayer;
  }
}

TEST(ScriptedConnectionTest, MovingTheModelMovesTheScriptsTensors) {
  Connection connection = MakeConnection(Scripted(ScriptBytes(kReZero)), {1, 0});
  connection->to(torch::kDouble);
  const torch::Tensor h = torch::randn({2, 3, 8}, torch::kDouble);
  const torch::Tensor out = connection->forward(h, Doubling());
  EXPECT_EQ(out.scalar_type(), torch::kDouble);
  EXPECT_EQ(connection->named_parameters()["script_alpha"].scalar_type(), torch::kDouble);
}

TEST(ScriptedConnectionTest, GenericDiagnosticsOnly) {
  Connection connection = MakeConnection(Scripted(ScriptBytes(kReZero)), {1, 0});
  ConnectionDiagnostics diagnostics;
  const torch::Tensor h = torch::randn({2, 5, 8});
  connection->forward(h, Doubling(), &diagnostics);
  EXPECT_FALSE(diagnostics.alpha.has_value());
  EXPECT_NEAR(diagnostics.hidden_norm, h.norm(2, -1).mean().item<double>(), 1e-5);
  EXPECT_LT(diagnostics.theta, 1e-3);  // alpha = 0: h' = h
  ASSERT_EQ(diagnostics.extra.size(), 2u);
  EXPECT_EQ(diagnostics.extra[0].first, "token_cos");
  EXPECT_EQ(diagnostics.extra[1].first, "eff_rank");
}

TEST(ScriptedConnectionTest, BadScriptsAreRefusedNamingTheCause) {
  const auto refusal = [](const std::string& bytes) -> std::string {
    try {
      MakeConnection(Scripted(bytes), {1, 0});
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(refusal("PK not a module").find("not a TorchScript module"), std::string::npos);
  EXPECT_NE(refusal("").find("no connection script"), std::string::npos);
  const std::string two_arguments = ScriptBytes(R"(
def forward(self, h: Tensor, f: Tensor) -> Tensor:
    return h + f
)");
  EXPECT_NE(refusal(two_arguments).find("(h, f, index: int, count: int)"), std::string::npos);
}

}  // namespace
}  // namespace spheret::nn
