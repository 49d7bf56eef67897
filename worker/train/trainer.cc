#include "worker/train/trainer.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "worker/nn/gpt.h"
#include "worker/train/dataset.h"
#include "worker/train/schedule.h"

namespace spheret::train {
namespace fs = std::filesystem;
namespace {

constexpr size_t kLossWindow = 200;  // train/loss_avg: mean of the last 200 step losses.

using Clock = std::chrono::steady_clock;

struct Splits {
  TokenFile train, val;
};

std::string OpenSplits(const TrainConfig& config, Splits* splits, nn::GptConfig* gpt) {
  const std::string dir = ResolveDatasetDir(config);
  DatasetMeta meta;
  if (std::string error = ReadDatasetMeta(dir, &meta); !error.empty()) return error;
  for (auto [name, file] :
       {std::pair{"train.bin", &splits->train}, std::pair{"val.bin", &splits->val}}) {
    if (std::string error = file->Open(dir + "/" + name); !error.empty()) {
      return error + " (prepare it with: spheret-lm prepare --builtin fortunes --out " + dir + ")";
    }
    if (file->size() <= config.block_size) {
      return dir + "/" + name + " has " + std::to_string(file->size()) +
             " tokens, fewer than block_size + 1";
    }
  }
  gpt->vocab_size = meta.vocab_size;
  return "";
}

nn::GptConfig ModelConfig(const TrainConfig& config) {
  nn::GptConfig gpt;
  gpt.block_size = config.block_size;
  gpt.n_layer = config.n_layer;
  gpt.n_head = config.n_head;
  gpt.n_embd = config.n_embd;
  gpt.dropout = config.dropout;
  gpt.bias = config.bias;
  gpt.connection = config.connection;
  return gpt;
}

// AdamW with nanoGPT's groups: weight decay on parameters of dim >= 2 only.
std::unique_ptr<torch::optim::AdamW> MakeOptimizer(nn::Gpt& model, const TrainConfig& config) {
  std::vector<torch::Tensor> decay, no_decay;
  for (const torch::Tensor& p : model->parameters()) (p.dim() >= 2 ? decay : no_decay).push_back(p);
  auto options = [&](double weight_decay) {
    return std::make_unique<torch::optim::AdamWOptions>(
        torch::optim::AdamWOptions(config.learning_rate)
            .betas({config.beta1, config.beta2})
            .eps(1e-8)
            .weight_decay(weight_decay));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, options(config.weight_decay));
  groups.emplace_back(no_decay, options(0.0));
  return std::make_unique<torch::optim::AdamW>(groups,
                                               torch::optim::AdamWOptions(config.learning_rate));
}

double EstimateLoss(nn::Gpt& model, const TokenFile& tokens, const TrainConfig& config,
                    torch::Generator& generator) {
  torch::NoGradGuard no_grad;
  model->eval();
  double total = 0;
  for (int64_t k = 0; k < config.eval_iters; ++k) {
    auto [x, y] = SampleBatch(tokens, config.batch_size, config.block_size, generator);
    total += model->loss(x, y).item<double>();
  }
  model->train();
  return total / static_cast<double>(config.eval_iters);
}

void EmitDiagnostics(nn::Gpt& model, const torch::Tensor& x, int64_t step, EventWriter* events) {
  torch::NoGradGuard no_grad;
  std::vector<nn::ConnectionDiagnostics> diagnostics;
  model->forward(x, &diagnostics);
  for (size_t i = 0; i < diagnostics.size(); ++i) {
    const nn::ConnectionDiagnostics& d = diagnostics[i];
    events->Emit({{"type", "diag"},
                  {"step", step},
                  {"layer", static_cast<int64_t>(i / 2 + 1)},
                  {"sublayer", i % 2 == 0 ? "attn" : "mlp"},
                  {"hidden_norm", d.hidden_norm},
                  {"theta", d.theta},
                  {"alpha", d.alpha ? nlohmann::json(*d.alpha) : nlohmann::json(nullptr)},
                  {"radial", d.radial}});
  }
}

std::string FormatDuration(double seconds) {
  char text[32];
  const auto s = static_cast<long>(seconds + 0.5);
  std::snprintf(text, sizeof(text), "%ld:%02ld", s / 60, s % 60);
  return text;
}

}  // namespace

std::string ResolveDatasetDir(const TrainConfig& config) {
  std::error_code ec;
  if (fs::is_directory(config.dataset, ec)) return config.dataset;
  return (fs::path(config.data_root) / config.dataset).string();
}

TrainResult Train(const TrainConfig& config, const std::string& out_dir, EventWriter* events,
                  std::ostream* log) {
  TrainResult result;
  Splits splits;
  nn::GptConfig gpt_config = ModelConfig(config);
  if (std::string error = OpenSplits(config, &splits, &gpt_config); !error.empty()) {
    result.error = error;
    return result;
  }
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  std::ofstream(out_dir + "/config.json") << ConfigToJson(config).dump(2) << "\n";

  torch::manual_seed(config.seed);
  torch::Generator generator = at::detail::createCPUGenerator(config.seed);
  nn::Gpt model(gpt_config);
  auto optimizer = MakeOptimizer(model, config);
  const ScheduleOptions schedule{config.learning_rate, config.min_lr, config.warmup_iters,
                                 config.lr_decay_iters, config.decay_lr};
  const int64_t tokens_per_step =
      config.batch_size * config.block_size * config.gradient_accumulation_steps;
  *log << "spheret-lm: " << nn::MethodId(config.connection.method) << ", " << config.n_layer
       << " layers x " << config.n_embd << " wide, " << model->num_parameters() / 1e6
       << "M parameters, vocab " << gpt_config.vocab_size << ", " << tokens_per_step
       << " tokens per step, " << torch::get_num_threads() << " threads" << std::endl;

  std::deque<double> window;
  auto [x, y] = SampleBatch(splits.train, config.batch_size, config.block_size, generator);
  const Clock::time_point start = Clock::now();
  for (int64_t step = 0;; ++step) {
    if (step % config.eval_interval == 0 || step == config.max_iters) {
      result.val_loss = EstimateLoss(model, splits.val, config, generator);
      events->Metric(step, "val/loss", result.val_loss);
      events->Metric(step, "val/ppl", std::exp(result.val_loss));
      *log << "step " << step << ": val loss " << result.val_loss << std::endl;
    }
    if (step == config.max_iters) break;
    if (config.diag_interval > 0 && step % config.diag_interval == 0) {
      EmitDiagnostics(model, x, step, events);
    }
    const double lr = LearningRate(step, schedule);
    for (auto& group : optimizer->param_groups()) group.options().set_lr(lr);
    const Clock::time_point step_start = Clock::now();
    double step_loss = 0;
    for (int64_t micro = 0; micro < config.gradient_accumulation_steps; ++micro) {
      const torch::Tensor loss =
          model->loss(x, y) / static_cast<double>(config.gradient_accumulation_steps);
      std::tie(x, y) = SampleBatch(splits.train, config.batch_size, config.block_size, generator);
      loss.backward();
      step_loss += loss.item<double>();
    }
    const double grad_norm = config.grad_clip > 0 ? torch::nn::utils::clip_grad_norm_(
                                                        model->parameters(), config.grad_clip)
                                                  : 0.0;
    optimizer->step();
    optimizer->zero_grad(/*set_to_none=*/true);
    result.steps = step + 1;
    window.push_back(step_loss);
    if (window.size() > kLossWindow) window.pop_front();
    result.train_loss_avg = std::accumulate(window.begin(), window.end(), 0.0) / window.size();
    if (!std::isfinite(step_loss) || step_loss > config.divergence_loss) {
      events->Emit(
          {{"type", "diverged"},
           {"step", step},
           {"loss", std::isfinite(step_loss) ? nlohmann::json(step_loss) : nlohmann::json(nullptr)},
           {"bound", config.divergence_loss}});
      *log << "step " << step << ": loss " << step_loss << " diverged" << std::endl;
      result.outcome = TrainOutcome::kDiverged;
      return result;
    }
    if (step % config.log_interval == 0) {
      const double seconds = std::chrono::duration<double>(Clock::now() - step_start).count();
      const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
      const double tokens_per_sec = tokens_per_step / std::max(seconds, 1e-9);
      events->Metric(step, "train/loss", step_loss);
      events->Metric(step, "train/loss_avg", result.train_loss_avg);
      events->Metric(step, "lr", lr);
      events->Metric(step, "grad_norm", grad_norm);
      events->Metric(step, "tokens_per_sec", tokens_per_sec);
      char line[160];
      std::snprintf(line, sizeof(line),
                    "step %lld/%lld | loss %.4f (avg %.4f) | lr %.2e | %.0f tok/s | eta %s",
                    static_cast<long long>(step + 1), static_cast<long long>(config.max_iters),
                    step_loss, result.train_loss_avg, lr, tokens_per_sec,
                    FormatDuration(elapsed / (step + 1) * (config.max_iters - step - 1)).c_str());
      *log << line << std::endl;
    }
  }
  events->Emit({{"type", "done"},
                {"step", result.steps},
                {"train_loss", result.train_loss_avg},
                {"val_loss", result.val_loss},
                {"val_ppl", std::exp(result.val_loss)}});
  result.outcome = TrainOutcome::kDone;
  return result;
}

}  // namespace spheret::train
