#include "worker/train/diagnostics.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <limits>
#include <string_view>

#include "protocol/metric_catalog.h"
#include "protocol/trainer_events.h"
#include "worker/nn/model_stability.h"
#include "worker/nn/stability.h"
#include "worker/train/autocast.h"
#include "worker/train/gate_schedule.h"
#include "worker/train/sharded_model.h"
#include "worker/train/side_seed.h"
#include "worker/train/train_data.h"

namespace spheret::train {

void Diagnostics::MaybeEmit(int64_t step) {
  const bool geometry = config_.diag_interval > 0 && step % config_.diag_interval == 0;
  const bool jacobian = config_.jacobian_interval > 0 && step % config_.jacobian_interval == 0;
  if (!geometry && !jacobian) return;
  gates_->Set(step);  // the diag forward sees this step's gates
  Emit(step, geometry, jacobian);
}

void Diagnostics::Emit(int64_t step, bool geometry, bool jacobian) {
  if (rank_ != 0) return;  // only rank 0 writes events (and no collective runs here)
  // A batch of its own, from a generator of its own: diagnostics leave the run's RNG untouched.
  torch::Generator generator =
      at::detail::createCPUGenerator(SideSeed(config_.seed, SideStream::kDiag, step));
  const torch::Tensor x = data_->Batch(data_->train(), generator, model_->device()).first;
  const torch::Tensor sequence = x.narrow(0, 0, 1);  // what the probes and Jacobians measure
  Rows rows;
  if (geometry) AddGeometry(step, x, &rows);
  if (jacobian) AddJacobians(step, sequence, &rows);
  auto emit = [&](int64_t layer, const char* sublayer, protocol::DiagValues values) {
    if (values.empty()) return;
    protocol::DiagEvent diag;
    diag.step = step;
    diag.layer = layer;
    diag.sublayer = sublayer;
    diag.values = std::move(values);
    events_->Emit(diag);
  };
  for (size_t i = 0; i < rows.updates.size(); ++i) {  // depth over the loops, attn then mlp
    emit(static_cast<int64_t>(i / 2 + 1),
         i % 2 == 0 ? protocol::kAttnSublayer : protocol::kMlpSublayer, std::move(rows.updates[i]));
  }
  emit(0, protocol::kModelSublayer, std::move(rows.model));
  for (auto& [m, values] : rows.dyadic) emit(m, protocol::kDyadicSublayer, std::move(values));
}

void Diagnostics::AddGeometry(int64_t step, const torch::Tensor& x, Rows* rows) {
  nn::Gpt& gpt = model_->gpt();
  std::vector<nn::ConnectionDiagnostics> diagnostics;
  {
    torch::NoGradGuard no_grad;
    CudaAutocast autocast(model_->autocast());
    gpt->forward(x, &diagnostics);
  }
  rows->updates.resize(std::max(rows->updates.size(), diagnostics.size()));
  for (size_t i = 0; i < diagnostics.size(); ++i) {
    const nn::ConnectionDiagnostics& d = diagnostics[i];
    protocol::DiagValues& values = rows->updates[i];
    values.emplace_back(protocol::kHiddenNorm, d.hidden_norm);
    values.emplace_back(protocol::kTheta, d.theta);
    if (d.alpha) values.emplace_back(protocol::kAlpha, *d.alpha);
    values.emplace_back(protocol::kRadial, d.radial);
    values.insert(values.end(), d.extra.begin(), d.extra.end());
  }
  if (!IsSphereMethod(config_.connection.method)) return;  // Proposition 6 covers these only
  AddStability(step, x, diagnostics, rows);
}

void Diagnostics::AddStability(int64_t step, const torch::Tensor& x,
                               const std::vector<nn::ConnectionDiagnostics>& diagnostics,
                               Rows* rows) {
  // Proposition 6 on the first sequence (eval mode, the model's dtype): Delta_l and m_l per
  // update; theta_l^2 from the batch above (the mean over its tokens).
  const std::vector<nn::ConnectionDiagnostics> probe =
      nn::ProbeStability(*model_->gpt(), x.narrow(0, 0, 1), config_.jacobian_iters,
                         SideSeed(config_.seed, SideStream::kJacobian, step));
  std::vector<double> delta, margin, theta2;
  auto field = [](const protocol::DiagValues& values, std::string_view name) {
    for (const auto& [key, value] : values) {
      if (key == name) return value;
    }
    return std::numeric_limits<double>::quiet_NaN();
  };
  for (size_t i = 0; i < diagnostics.size() && i < probe.size(); ++i) {
    for (const auto& [name, value] : probe[i].extra) {
      if (name == protocol::kBNorm || name == protocol::kEta || name == protocol::kDelta ||
          name == protocol::kMargin || name == protocol::kMinAbsCos) {
        rows->updates[i].emplace_back(name, value);
      }
    }
    delta.push_back(field(probe[i].extra, protocol::kDelta));
    margin.push_back(field(probe[i].extra, protocol::kMargin));
    theta2.push_back(field(diagnostics[i].extra, protocol::kTheta2));
  }
  const nn::StabilitySummary summary = nn::SummarizeStability(delta, margin, theta2);
  rows->model.emplace_back(protocol::kDeltaSum, summary.delta_sum);
  rows->model.emplace_back(protocol::kTheta2Sum, summary.theta2_sum);
  rows->model.emplace_back(protocol::kBoundMax, summary.bound_max);
  rows->model.emplace_back(protocol::kBoundMin, summary.bound_min);
  for (size_t i = 0; i < summary.budget_start.size(); ++i) {
    rows->dyadic.emplace_back(summary.budget_start[i],
                              protocol::DiagValues{{protocol::kTheta2Budget, summary.budget[i]}});
  }
}

void Diagnostics::AddJacobians(int64_t step, const torch::Tensor& sequence, Rows* rows) {
  const nn::ModelJacobians j =
      nn::MeasureJacobians(*model_->gpt(), sequence, config_.jacobian_iters,
                           SideSeed(config_.seed, SideStream::kJacobian, step));
  rows->updates.resize(std::max(rows->updates.size(), j.updates.size()));
  for (size_t i = 0; i < j.updates.size(); ++i) {
    const nn::UpdateJacobian& u = j.updates[i];
    protocol::DiagValues& values = rows->updates[i];
    values.emplace_back(protocol::kJacSigmaMax, u.sigma.sigma_max);
    values.emplace_back(protocol::kJacSigmaMinUpper, u.sigma.sigma_min_upper);
    values.emplace_back(protocol::kJacSigmaMinLower, u.sigma.sigma_min_lower);
    if (u.bound_max) values.emplace_back(protocol::kJacBoundMax, *u.bound_max);
    if (u.bound_min) values.emplace_back(protocol::kJacBoundMin, *u.bound_min);
  }
  rows->model.emplace_back(protocol::kE2eSigmaMax, j.e2e.sigma_max);
  rows->model.emplace_back(protocol::kE2eSigmaMinUpper, j.e2e.sigma_min_upper);
  rows->model.emplace_back(protocol::kE2eSigmaMinLower, j.e2e.sigma_min_lower);
}

}  // namespace spheret::train
