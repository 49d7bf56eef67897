#include "worker/nn/model_stability.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <functional>
#include <utility>
#include <vector>

#include "worker/nn/jacobian.h"
#include "worker/nn/sphere_connection.h"
#include "worker/nn/stability.h"

namespace spheret::nn {
namespace {

// Eval mode for the scope, then the previous mode back.
class EvalScope {
 public:
  explicit EvalScope(GptImpl& model) : model_(model), was_training_(model.is_training()) {
    model_.eval();
  }
  ~EvalScope() { model_.train(was_training_); }

 private:
  GptImpl& model_;
  bool was_training_;
};

// The model's floating parameters and buffers in fp64 for the scope, then their own dtypes back,
// in place: the same tensors (the optimizer's state and the run's references stay valid), only
// their storage replaced; each round trip is exact (fp64 holds every fp32, bf16 and fp16 value).
class DoublePrecisionScope {
 public:
  explicit DoublePrecisionScope(torch::nn::Module& model) {
    torch::NoGradGuard no_grad;
    for (torch::Tensor& t : model.parameters()) Convert(t);
    for (torch::Tensor& t : model.buffers()) Convert(t);
  }
  ~DoublePrecisionScope() {
    torch::NoGradGuard no_grad;
    for (auto& [tensor, type] : saved_) tensor.set_data(tensor.to(type));
  }
  DoublePrecisionScope(const DoublePrecisionScope&) = delete;
  DoublePrecisionScope& operator=(const DoublePrecisionScope&) = delete;

 private:
  void Convert(torch::Tensor& t) {  // a tied tensor comes twice: converted once
    if (!t.is_floating_point() || t.scalar_type() == torch::kDouble) return;
    saved_.emplace_back(t, t.scalar_type());
    t.set_data(t.to(torch::kDouble));
  }
  std::vector<std::pair<torch::Tensor, torch::ScalarType>> saved_;
};

// One update of the stack: the map h -> h' and, for a sphere connection, its parts.
struct Update {
  std::function<torch::Tensor(const torch::Tensor&)> map;
  SpheretConnectionImpl* sphere = nullptr;
  Sublayer sublayer;
  bool loop_start = false;  // the first update of a loop after the first: InterLoop comes before
};

std::vector<Update> Updates(GptImpl& model) {
  std::vector<Update> updates;
  for (int64_t loop = 0; loop < model.config().loops; ++loop) {
    for (int64_t b = 0; b < model.config().n_layer; ++b) {
      BlockImpl& block = model.block_at(b);
      for (int sub = 0; sub < 2; ++sub) {
        ConnectionImpl* conn = sub == 0 ? block.conn_attn.get() : block.conn_mlp.get();
        Sublayer sublayer = [&block, sub](const torch::Tensor& x) {
          return sub == 0 ? block.attn(x) : block.mlp(x);
        };
        updates.push_back(Update{
            [conn, sublayer](const torch::Tensor& h) { return conn->forward(h, sublayer); },
            dynamic_cast<SpheretConnectionImpl*>(conn), sublayer, loop > 0 && b == 0 && sub == 0});
      }
    }
  }
  return updates;
}

SingularRange Range(const Operator& f, const torch::Tensor& x, int64_t iterations, uint64_t seed) {
  torch::AutoGradMode grad(true);
  Linearization j(f, x);
  torch::Generator generator = at::detail::createCPUGenerator(seed);
  const torch::Tensor start =
      torch::randn(x.sizes(), generator, torch::TensorOptions(torch::kDouble)).to(x.options());
  return MeasureSingularRange([&](const torch::Tensor& v) { return j.Jv(v); },
                              [&](const torch::Tensor& u) { return j.JTu(u); }, start, iterations,
                              generator);
}

}  // namespace

std::vector<ConnectionDiagnostics> ProbeStability(GptImpl& model, const torch::Tensor& sequence,
                                                  int64_t iterations, uint64_t seed) {
  const EvalScope eval(model);
  const CompositeModeGuard composite;
  const StabilityProbeGuard probe(iterations, seed);
  torch::NoGradGuard no_grad;
  std::vector<ConnectionDiagnostics> diagnostics;
  model.forward(sequence, &diagnostics);
  return diagnostics;
}

ModelJacobians MeasureJacobians(GptImpl& model, const torch::Tensor& sequence, int64_t iterations,
                                uint64_t seed) {
  const EvalScope eval(model);
  const DoublePrecisionScope fp64(model);
  const CompositeModeGuard composite;
  ForwardRecord record;
  {
    torch::NoGradGuard no_grad;
    model.hidden(sequence, &record);
  }
  const std::vector<Update> updates = Updates(model);
  ModelJacobians out;
  const torch::Tensor h0 = record.embedded;  // (1, T, C)
  torch::Tensor h = h0;
  for (const Update& update : updates) {
    if (update.loop_start) {
      torch::NoGradGuard no_grad;
      h = model.InterLoop(h, h0);  // J_l is the update's own map; G includes the boundaries
    }
    UpdateJacobian j;
    j.sigma = Range(update.map, h, iterations, seed);
    if (update.sphere != nullptr) {
      SpheretConnectionImpl& conn = *update.sphere;
      const Sublayer& sublayer = update.sublayer;
      const UpdateStability s = MeasureUpdateStability(
          [&](const torch::Tensor& x) { return sublayer(conn.inner_norm.forward(x)); }, h,
          conn.alpha().detach(), conn.rule, iterations, at::detail::createCPUGenerator(seed));
      j.bound_max = 1.0 + s.delta();
      j.bound_min = s.margin();
    }
    out.updates.push_back(j);
    torch::NoGradGuard no_grad;
    h = update.map(h);
  }
  const Operator stack = [&](const torch::Tensor& x) {
    torch::Tensor y = x;
    for (const Update& update : updates) {
      if (update.loop_start) y = model.InterLoop(y, x);
      y = update.map(y);
    }
    return y;
  };
  out.e2e = Range(stack, record.embedded, iterations, seed);
  return out;
}

}  // namespace spheret::nn
