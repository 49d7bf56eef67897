#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "protocol/trainer_events.h"
#include "worker/nn/autonorm.h"
#include "worker/nn/model_stability.h"
#include "worker/nn/stability.h"
#include "worker/train/autocast.h"
#include "worker/train/run.h"

namespace spheret::train {
namespace {

// The seed of a side stream (evaluation, diagnostics) at `step`: SplitMix64 over (seed, stream,
// step), so when and how often a run evaluates never moves the training generator, and a resumed
// run draws the same evaluation batches as a straight one.
enum class SideStream : uint64_t { kEval = 1, kDiag = 2, kGate = 3, kJacobian = 4, kGateFixed = 5 };
uint64_t SideSeed(int64_t seed, SideStream stream, int64_t step) {
  uint64_t x = static_cast<uint64_t>(seed);
  for (uint64_t word : {static_cast<uint64_t>(stream), static_cast<uint64_t>(step)}) {
    x += 0x9E3779B97F4A7C15ull ^ word;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    x ^= x >> 31;
  }
  return x;
}

// SampleBatch, its error thrown: Train turns it into the run's error.
std::pair<torch::Tensor, torch::Tensor> SampleOrThrow(const TokenFile& tokens, int64_t batch,
                                                      int64_t block, torch::Generator& generator) {
  absl::StatusOr<std::pair<torch::Tensor, torch::Tensor>> sampled =
      SampleBatch(tokens, batch, block, generator);
  if (!sampled.ok()) throw std::runtime_error(std::string(sampled.status().message()));
  return *std::move(sampled);
}

}  // namespace

std::pair<torch::Tensor, torch::Tensor> Run::Batch(const TokenFile& tokens,
                                                   torch::Generator& generator) {
  auto [x, y] = SampleOrThrow(tokens, config_.batch_size, config_.block_size, generator);
  return {x.to(device_), y.to(device_)};
}

torch::Tensor Run::ExitLosses(const torch::Tensor& x, const torch::Tensor& y) {
  CudaAutocast autocast(autocast_);
  return model_->exit_losses(x, y);
}

torch::Tensor Run::Objective(const torch::Tensor& x, const torch::Tensor& y) {
  CudaAutocast autocast(autocast_);
  return model_->objective(x, y);
}

torch::Tensor Run::Backward(const torch::Tensor& x, const torch::Tensor& y, double divisor) {
  const int n = shards_->size();
  if (n == 1) {
    const torch::Tensor terms = Objective(x, y) / divisor;
    terms[0].backward();
    return terms.detach().to(torch::kDouble);
  }
  const int64_t rows = x.size(0);
  std::vector<torch::Tensor> losses(n);
  std::vector<std::vector<torch::Tensor>> grads(n);
  shards_->Run([&](int s) {
    const auto [begin, count] = ShardRows(rows, n, s);
    const torch::Tensor terms = Objective(x.narrow(0, begin, count), y.narrow(0, begin, count)) *
                                (static_cast<double>(count) / static_cast<double>(rows)) / divisor;
    grads[s] = torch::autograd::grad({terms[0]}, params_, /*grad_outputs=*/{},
                                     /*retain_graph=*/false, /*create_graph=*/false,
                                     /*allow_unused=*/true);
    losses[s] = terms.detach();
  });
  // Each gradient is its shards' sum in shard order (not in order of arrival), so a run repeats
  // bit for bit; the parameters are split among the threads for the sums.
  shards_->Run([&](int s) {
    torch::NoGradGuard no_grad;
    for (size_t i = s; i < params_.size(); i += n) {
      torch::Tensor sum;
      for (int k = 0; k < n; ++k) {
        const torch::Tensor& g = grads[k][i];
        if (g.defined()) sum = sum.defined() ? sum + g : g.contiguous();
      }
      if (!sum.defined()) continue;
      torch::Tensor& grad = params_[i].mutable_grad();
      grad = grad.defined() ? grad + sum : sum;
    }
  });
  torch::Tensor total = losses[0].to(torch::kDouble);
  for (int k = 1; k < n; ++k) total += losses[k].to(torch::kDouble);
  return total;
}

std::vector<double> Run::EvalLosses(const torch::Tensor& x, const torch::Tensor& y) {
  const int n = shards_->size();
  const int64_t rows = x.size(0);
  // Each exit's loss on `count` of the rows, weighted by their share.
  auto weighted = [&](const torch::Tensor& losses, int64_t count) {
    const torch::Tensor cpu = losses.to(torch::kDouble).cpu();  // (exits)
    std::vector<double> values(static_cast<size_t>(cpu.numel()));
    for (size_t k = 0; k < values.size(); ++k) {
      values[k] = cpu[static_cast<int64_t>(k)].item<double>();
      if (count != rows)
        values[k] = values[k] * static_cast<double>(count) / static_cast<double>(rows);
    }
    return values;
  };
  if (n == 1) return weighted(ExitLosses(x, y), rows);
  std::vector<std::vector<double>> parts(n);
  shards_->Run([&](int s) {
    torch::NoGradGuard no_grad;
    const auto [begin, count] = ShardRows(rows, n, s);
    parts[s] = weighted(ExitLosses(x.narrow(0, begin, count), y.narrow(0, begin, count)), count);
  });
  std::vector<double> total(parts[0].size(), 0.0);
  for (const std::vector<double>& part : parts) {
    for (size_t k = 0; k < total.size(); ++k) total[k] += part[k];
  }
  return total;
}

std::vector<double> Run::EstimateLosses(const TokenFile& tokens, int64_t step) {
  torch::NoGradGuard no_grad;
  model_->eval();
  torch::Generator generator =
      at::detail::createCPUGenerator(SideSeed(config_.seed, SideStream::kEval, step));
  std::vector<double> total;
  for (int64_t k = 0; k < config_.eval_iters; ++k) {
    auto [x, y] = Batch(tokens, generator);
    const std::vector<double> losses = EvalLosses(x, y);
    total.resize(losses.size(), 0.0);
    for (size_t e = 0; e < losses.size(); ++e) total[e] += losses[e];
  }
  model_->train();
  for (double& loss : total) loss /= static_cast<double>(config_.eval_iters);
  return total;
}

void Run::EmitDiagnostics(int64_t step, bool geometry, bool jacobian) {
  if (rank_ != 0) return;  // only rank 0 writes events (and no collective runs here)
  // A batch of its own, from a generator of its own: diagnostics leave the run's RNG untouched.
  torch::Generator generator =
      at::detail::createCPUGenerator(SideSeed(config_.seed, SideStream::kDiag, step));
  const torch::Tensor x = Batch(train_, generator).first;
  const torch::Tensor sequence = x.narrow(0, 0, 1);  // what the probes and Jacobians measure
  DiagRows rows;
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

void Run::AddGeometry(int64_t step, const torch::Tensor& x, DiagRows* rows) {
  std::vector<nn::ConnectionDiagnostics> diagnostics;
  {
    torch::NoGradGuard no_grad;
    CudaAutocast autocast(autocast_);
    model_->forward(x, &diagnostics);
  }
  rows->updates.resize(std::max(rows->updates.size(), diagnostics.size()));
  for (size_t i = 0; i < diagnostics.size(); ++i) {
    const nn::ConnectionDiagnostics& d = diagnostics[i];
    protocol::DiagValues& values = rows->updates[i];
    values.emplace_back("hidden_norm", d.hidden_norm);
    values.emplace_back("theta", d.theta);
    if (d.alpha) values.emplace_back("alpha", *d.alpha);
    values.emplace_back("radial", d.radial);
    values.insert(values.end(), d.extra.begin(), d.extra.end());
  }
  if (!IsSphereMethod(config_.connection.method)) return;  // Proposition 6 covers these only
  // Proposition 6 on the first sequence (eval mode, the model's dtype): Delta_l and m_l per
  // update; theta_l^2 from the batch above (the mean over its tokens).
  const std::vector<nn::ConnectionDiagnostics> probe =
      nn::ProbeStability(*model_, x.narrow(0, 0, 1), config_.jacobian_iters,
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
      if (name == "b_norm" || name == "eta" || name == "delta" || name == "margin" ||
          name == "min_abs_cos") {
        rows->updates[i].emplace_back(name, value);
      }
    }
    delta.push_back(field(probe[i].extra, "delta"));
    margin.push_back(field(probe[i].extra, "margin"));
    theta2.push_back(field(diagnostics[i].extra, "theta2"));
  }
  const nn::StabilitySummary summary = nn::SummarizeStability(delta, margin, theta2);
  rows->model.emplace_back("delta_sum", summary.delta_sum);
  rows->model.emplace_back("theta2_sum", summary.theta2_sum);
  rows->model.emplace_back("bound_max", summary.bound_max);
  rows->model.emplace_back("bound_min", summary.bound_min);
  for (size_t i = 0; i < summary.budget_start.size(); ++i) {
    rows->dyadic.emplace_back(summary.budget_start[i],
                              protocol::DiagValues{{"theta2_budget", summary.budget[i]}});
  }
}

void Run::AddJacobians(int64_t step, const torch::Tensor& sequence, DiagRows* rows) {
  const nn::ModelJacobians j =
      nn::MeasureJacobians(*model_, sequence, config_.jacobian_iters,
                           SideSeed(config_.seed, SideStream::kJacobian, step));
  rows->updates.resize(std::max(rows->updates.size(), j.updates.size()));
  for (size_t i = 0; i < j.updates.size(); ++i) {
    const nn::UpdateJacobian& u = j.updates[i];
    protocol::DiagValues& values = rows->updates[i];
    values.emplace_back("jac_sigma_max", u.sigma_max);
    values.emplace_back("jac_sigma_min", u.sigma_min);
    if (u.bound_max) values.emplace_back("jac_bound_max", *u.bound_max);
    if (u.bound_min) values.emplace_back("jac_bound_min", *u.bound_min);
  }
  rows->model.emplace_back("e2e_sigma_max", j.e2e_sigma_max);
  rows->model.emplace_back("e2e_sigma_min", j.e2e_sigma_min);
}

void Run::PrepareGates(int64_t step) {
  const std::vector<nn::AutoNormConnectionImpl*> gates = model_->gates();
  if (gates.empty()) return;
  const AutoNormMode mode = config_.connection.autonorm_mode;
  if (mode != AutoNormMode::kLearned) {
    // A uniform draw per gate from the step's own stream (random) or the run's (random_fixed):
    // the same on every shard and rank, and on resume.
    const uint64_t seed = mode == AutoNormMode::kRandom
                              ? SideSeed(config_.seed, SideStream::kGate, step)
                              : SideSeed(config_.seed, SideStream::kGateFixed, 0);
    const torch::Tensor picks = nn::DrawGateChoices(seed, static_cast<int64_t>(gates.size()));
    for (size_t i = 0; i < gates.size(); ++i) {
      gates[i]->Pick(picks[static_cast<int64_t>(i)].item<int64_t>());
    }
    return;
  }
  const int64_t horizon =
      config_.gate_freeze_step > 0 ? config_.gate_freeze_step : config_.lr_decay_iters;
  const double progress =
      horizon > 0 ? std::min(1.0, static_cast<double>(step) / static_cast<double>(horizon)) : 1.0;
  const double temperature =
      config_.gate_temp_start * std::pow(config_.gate_temp_end / config_.gate_temp_start, progress);
  // Gumbel noise from the step's own stream: the same on every shard and rank, and on resume.
  torch::Generator generator =
      at::detail::createCPUGenerator(SideSeed(config_.seed, SideStream::kGate, step));
  const torch::Tensor uniform =
      torch::rand({static_cast<int64_t>(gates.size()), nn::AutoNormConnectionImpl::kCandidates},
                  generator, torch::TensorOptions(torch::kDouble))
          .clamp(1e-12, 1.0 - 1e-12);
  const torch::Tensor noise = (-torch::log(-torch::log(uniform))).to(torch::kFloat);
  for (size_t i = 0; i < gates.size(); ++i) {
    if (config_.gate_freeze_step > 0 && step >= config_.gate_freeze_step) gates[i]->Freeze();
    gates[i]->SetGate(temperature, noise[static_cast<int64_t>(i)]);
  }
}

bool Run::StopRequested() {
  const bool local = options_.stop != nullptr && options_.stop->load();
  if (!options_.communicator) return local;
  torch::Tensor flag = torch::full({}, local ? 1.0 : 0.0, torch::TensorOptions().device(device_));
  options_.communicator->AllReduceMean({flag});
  return flag.item<double>() > 0;
}

double Run::ClipGradNorm(double max_norm) {
  std::vector<torch::Tensor> grads;
  for (const torch::Tensor& p : params_) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  if (grads.empty()) return 0.0;
  const size_t n = shards_->size();
  std::vector<torch::Tensor> norms(grads.size());
  shards_->Run([&](int s) {
    for (size_t i = s; i < grads.size(); i += n) norms[i] = grads[i].norm(2);
  });
  const torch::Tensor total = norms.size() == 1 ? norms[0] : torch::stack(norms).norm(2);
  const torch::Tensor coef = torch::clamp(max_norm / (total + 1e-6), c10::nullopt, 1.0);
  shards_->Run([&](int s) {
    torch::NoGradGuard no_grad;
    for (size_t i = s; i < grads.size(); i += n) grads[i].mul_(coef);
  });
  return total.item<double>();
}

double Run::TrainStep(int64_t step, double lr, double* grad_norm) {
  PrepareGates(step);
  for (auto& group : optimizer_->param_groups()) group.options().set_lr(lr);
  // Every rank draws every micro-batch of the global batch from the same generator and trains
  // on its own share, so the global batch (and the RNG) is that of one process.
  const int64_t micro_steps = config_.gradient_accumulation_steps;
  torch::Tensor step_loss;  // [objective, CE per readout], summed over micro-batches
  for (int64_t micro = 0; micro < micro_steps; ++micro) {
    auto [x, y] = SampleOrThrow(train_, config_.batch_size, config_.block_size, generator_);
    if (micro % world_size_ != rank_) continue;
    const torch::Tensor terms =
        Backward(x.to(device_), y.to(device_), static_cast<double>(micro_steps / world_size_));
    step_loss = step_loss.defined() ? step_loss + terms : terms;
  }
  if (options_.communicator) {
    std::vector<torch::Tensor> grads;
    for (const torch::Tensor& p : params_) {
      if (p.grad().defined()) grads.push_back(p.grad());
    }
    options_.communicator->AllReduceMean(grads);
    options_.communicator->AllReduceMean({step_loss});
  }
  *grad_norm = config_.grad_clip > 0 ? ClipGradNorm(config_.grad_clip) : 0.0;
  optimizer_->step();
  optimizer_->zero_grad(/*set_to_none=*/true);
  model_->NormalizeWeights();
  step_terms_.clear();
  const torch::Tensor cpu = step_loss.cpu();
  for (int64_t i = 0; i < cpu.numel(); ++i) step_terms_.push_back(cpu[i].item<double>());
  // The reported loss is the last readout's CE; a non-finite objective diverges the run too.
  return std::isfinite(step_terms_.front()) ? step_terms_.back() : std::nan("");
}

double Run::TimedStep(int64_t step) {
  const double lr = LearningRate(step, Schedule());
  const Clock::time_point start = Clock::now();
  double grad_norm = 0;
  TrainStep(step, lr, &grad_norm);
  MaybeEmitDiagnostics(step);  // as the training loop does: bench prices diag_interval too
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace spheret::train
