#include "worker/nn/scripted_connection.h"

#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/script.h>
#include <torch/torch.h>

#include <sstream>
#include <stdexcept>
#include <string>

#include "worker/nn/euclidean_connections.h"
#include "worker/nn/norms.h"

namespace spheret::nn {
namespace {

// torch::nn::Module names may not hold '.'.
std::string ParameterName(const std::string& script_name) {
  std::string name = "script_" + script_name;
  for (char& c : name) {
    if (c == '.') c = '_';
  }
  return name;
}

torch::jit::Module LoadScript(const std::string& bytes) {
  if (bytes.empty()) {
    throw std::invalid_argument(
        "method scripted has no connection script (LoadConnectionScript was not called)");
  }
  std::istringstream in(bytes);
  try {
    return torch::jit::load(in, torch::kCPU);
  } catch (const c10::Error& e) {
    const std::string what = e.what();
    throw std::invalid_argument(
        "the connection file is not a TorchScript module (save one with "
        "torch.jit.script(module).save(path)): " +
        what.substr(0, what.find('\n')));
  }
}

class ScriptedConnectionImpl : public ConnectionImpl {
 public:
  ScriptedConnectionImpl(const ConnectionOptions& options, const SublayerPosition& position)
      : norm_(MakeNorm(options.inner_norm, options.n_embd, options.bias)),
        script_(LoadScript(options.script)),
        index_(2 * (position.block - 1) + position.sublayer + 1),
        count_(2 * options.n_layer) {
    register_module("norm", norm_.ptr());
    CheckSignature();
    for (const auto& item : script_.named_parameters(/*recurse=*/true)) {
      Register(item.name, item.value, /*parameter=*/true);
    }
    for (const auto& item : script_.named_buffers(/*recurse=*/true)) {
      Register(item.name, item.value, /*parameter=*/false);
    }
  }

  void train(bool on) override {
    ConnectionImpl::train(on);
    script_.train(on);
  }

 protected:
  torch::Tensor Step(const torch::Tensor& h, const Sublayer& sublayer,
                     ConnectionDiagnostics* diagnostics) override {
    const torch::Tensor f = sublayer(norm_.forward(h));  // (B, T, C)
    // The script's ops one by one, under LibTorch's autograd, at every step: the executor's
    // optimized graph differs from its first (profiling) runs in the last bit, and a resumed
    // process would run those again where the uninterrupted one did not.
    const torch::jit::GraphOptimizerEnabledGuard as_written(false);
    const torch::Tensor out = script_.forward({h, f, index_, count_}).toTensor();
    MeasureConnection(h, f, out, diagnostics);
    return out;
  }

 private:
  void CheckSignature() const {
    const auto method = script_.find_method("forward");
    // self, h, f, index, count
    if (!method || method->function().getSchema().arguments().size() != 5) {
      throw std::invalid_argument(
          "the connection module's forward must take (h, f, index: int, count: int)");
    }
  }

  // One of the script's tensors on this module, the same tensor (not a copy): the optimizer's
  // updates and a checkpoint's in-place loads reach the script.
  void Register(const std::string& script_name, const torch::Tensor& tensor, bool parameter) {
    const std::string name = ParameterName(script_name);
    if (named_parameters(false).contains(name) || named_buffers(false).contains(name)) {
      throw std::invalid_argument("the connection module's tensors '" + script_name +
                                  "' and another read the same once '.' reads as '_'");
    }
    if (parameter) {
      register_parameter(name, tensor, tensor.requires_grad());
    } else {
      register_buffer(name, tensor);
    }
  }

  torch::nn::AnyModule norm_;
  torch::jit::Module script_;
  int64_t index_, count_;
};

}  // namespace

Connection MakeScriptedConnection(const ConnectionOptions& options,
                                  const SublayerPosition& position) {
  return std::make_shared<ScriptedConnectionImpl>(options, position);
}

}  // namespace spheret::nn
