#include "worker/train/trainer.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "protocol/trainer_events.h"
#include "worker/nn/gpt.h"
#include "worker/train/checkpoint.h"
#include "worker/train/dataset.h"
#include "worker/train/event_history.h"
#include "worker/train/optimizer.h"
#include "worker/train/schedule.h"
#include "worker/train/shard_pool.h"

namespace spheret::train {
namespace fs = std::filesystem;
namespace {

constexpr size_t kLossWindow = 200;  // train/loss_avg: mean of the last 200 step losses.

using Clock = std::chrono::steady_clock;

// AdamW with nanoGPT's groups: weight decay on parameters of dim >= 2 only.
std::unique_ptr<FusedAdamW> MakeOptimizer(nn::Gpt& model, const TrainConfig& config) {
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
  return std::make_unique<FusedAdamW>(groups, torch::optim::AdamWOptions(config.learning_rate));
}

// bf16 autocast of CUDA ops for the guard's lifetime (when `enabled`), as torch.autocast.
class CudaAutocast {
 public:
  explicit CudaAutocast(bool enabled) : enabled_(enabled) {
    if (!enabled_) return;
    at::autocast::set_autocast_enabled(at::kCUDA, true);
    at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
    at::autocast::increment_nesting();
  }
  ~CudaAutocast() {
    if (!enabled_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_autocast_enabled(at::kCUDA, false);
  }
  CudaAutocast(const CudaAutocast&) = delete;
  CudaAutocast& operator=(const CudaAutocast&) = delete;

 private:
  bool enabled_;
};

// The device of `config` for this process; "" or a message when it is not available.
std::string ResolveDevice(const TrainConfig& config, int local_rank, torch::Device* device) {
  if (config.device == "cpu") {
    *device = torch::kCPU;
    return "";
  }
  const int64_t count = torch::cuda::is_available() ? torch::cuda::device_count() : 0;
  const int64_t index = config.device == "cuda" ? local_rank : std::stoll(config.device.substr(5));
  if (index >= count) {
    return "device " + config.device + " (GPU " + std::to_string(index) + ") requested, but " +
           std::to_string(count) + " CUDA device(s) are visible";
  }
  *device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
  return "";
}

// The intra-op threads the process started with (OMP_NUM_THREADS or the cores), read once: a
// ShardPool lowers the setting for its threads.
int StartingThreads() {
  static const int threads = torch::get_num_threads();
  return threads;
}

// The seed of a side stream (evaluation, diagnostics) at `step`: SplitMix64 over (seed, stream,
// step), so when and how often a run evaluates never moves the training generator, and a resumed
// run draws the same evaluation batches as a straight one.
enum class SideStream : uint64_t { kEval = 1, kDiag = 2 };
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

std::string FormatDuration(double seconds) {
  char text[32];
  const auto s = static_cast<long>(seconds + 0.5);
  std::snprintf(text, sizeof(text), "%ld:%02ld", s / 60, s % 60);
  return text;
}

// One training run: data, model, optimizer, RNG and the loss window.
class Run {
 public:
  Run(const TrainConfig& config, const TrainOptions& options, EventWriter* events,
      std::ostream* log)
      : config_(config),
        options_(options),
        rank_(options.communicator ? options.communicator->rank() : 0),
        world_size_(options.communicator ? options.communicator->world_size() : 1),
        null_stream_(nullptr),
        null_events_(&null_stream_),
        events_(rank_ == 0 ? events : &null_events_),
        log_(rank_ == 0 ? log : &null_stream_) {}

  std::string Open();
  std::string Resume(bool* resumed);
  // Rank 0: starts OUT/events.jsonl (trimmed to the resume step), replaying it when asked.
  std::string StartHistory(bool resumed);
  TrainResult Loop(bool resumed);
  // One training step at `step`'s learning rate; returns its wall time in seconds.
  double TimedStep(int64_t step);

 private:
  // The mean loss of eval_iters batches of `tokens` drawn from a generator seeded by the step.
  double EstimateLoss(const TokenFile& tokens, int64_t step);
  // A batch of random windows on the run's device.
  std::pair<torch::Tensor, torch::Tensor> Batch(const TokenFile& tokens,
                                                torch::Generator& generator);
  // The loss of (x, y) under the run's precision.
  torch::Tensor Loss(const torch::Tensor& x, const torch::Tensor& y);
  // Adds the gradient of loss(x, y) / divisor to the parameters' gradients, the batch's row
  // shards computed concurrently; returns loss(x, y) / divisor (fp64, detached).
  torch::Tensor Backward(const torch::Tensor& x, const torch::Tensor& y, double divisor);
  // loss(x, y) without gradients, the row shards computed concurrently.
  double EvalLoss(const torch::Tensor& x, const torch::Tensor& y);
  void EmitDiagnostics(int64_t step);
  std::string Checkpoint();
  // Whether options_.stop is raised on any rank (a collective under data parallelism).
  bool StopRequested();
  // torch::nn::utils::clip_grad_norm_ (2-norm) with the per-parameter work split among the shard
  // threads; returns the norm before clipping.
  double ClipGradNorm(double max_norm);
  ScheduleOptions Schedule() const {
    return {config_.learning_rate, config_.min_lr, config_.warmup_iters, config_.lr_decay_iters,
            config_.decay_lr};
  }
  // One optimizer step at learning rate `lr`; returns the step's loss.
  double TrainStep(double lr, double* grad_norm);

  const TrainConfig& config_;
  const TrainOptions& options_;
  const int rank_, world_size_;
  std::ostream null_stream_;  // Ranks other than 0 write nowhere.
  EventWriter null_events_;
  EventWriter* events_;
  std::ostream* log_;
  TokenFile train_, val_;
  torch::Device device_ = torch::kCPU;
  bool autocast_ = false;  // bf16 autocast of the forward (CUDA).
  nn::Gpt model_{nullptr};
  std::unique_ptr<FusedAdamW> optimizer_;
  std::vector<torch::Tensor> params_;  // model_->parameters(), in order
  std::unique_ptr<ShardPool> shards_;
  torch::Generator generator_;
  TrainState state_;
  EventHistory history_;
};

std::string Run::Open() {
  const std::string dir = ResolveDatasetDir(config_);
  DatasetMeta meta;
  if (std::string error = ReadDatasetMeta(dir, &meta); !error.empty()) return error;
  for (auto [name, file] : {std::pair{"train.bin", &train_}, std::pair{"val.bin", &val_}}) {
    if (std::string error = file->Open(dir + "/" + name); !error.empty()) {
      return error + " (prepare it with: spheret-lm prepare --builtin fortunes --out " + dir + ")";
    }
    if (file->size() <= config_.block_size) {
      return dir + "/" + name + " has " + std::to_string(file->size()) +
             " tokens, fewer than block_size + 1";
    }
  }
  if (config_.gradient_accumulation_steps % world_size_ != 0) {
    return "gradient_accumulation_steps (" + std::to_string(config_.gradient_accumulation_steps) +
           ") must be a multiple of the world size (" + std::to_string(world_size_) + ")";
  }
  std::error_code ec;
  fs::create_directories(options_.out_dir, ec);
  if (ec) return "cannot create " + options_.out_dir + ": " + ec.message();
  if (config_.vocab_size != 0 && config_.vocab_size < meta.vocab_size) {
    return "config key 'vocab_size' (" + std::to_string(config_.vocab_size) +
           ") is below the dataset's " + std::to_string(meta.vocab_size);
  }
  const int64_t vocab_size = config_.vocab_size != 0 ? config_.vocab_size : meta.vocab_size;
  state_.config = ConfigToJson(config_);
  state_.config["vocab_size"] = vocab_size;  // Resolved, so config.json rebuilds the model.
  if (rank_ == 0) {
    std::ofstream(options_.out_dir + "/" + protocol::kConfigFile) << state_.config.dump(2) << "\n";
  }
  torch::manual_seed(config_.seed);
  generator_ = at::detail::createCPUGenerator(config_.seed);
  if (std::string error = ResolveDevice(config_, options_.local_rank, &device_); !error.empty()) {
    return error;
  }
  autocast_ = config_.dtype == "bfloat16";
  model_ = nn::Gpt(ModelConfig(config_, vocab_size));  // Initialized on the CPU, then moved.
  model_->to(device_);
  optimizer_ = MakeOptimizer(model_, config_);
  params_ = model_->parameters();
  if (options_.communicator) options_.communicator->Broadcast(params_);
  const int threads = StartingThreads();
  int64_t shards = config_.batch_shards;
  if (shards == 0) {
    shards = device_.is_cpu() && config_.dropout == 0
                 ? std::min<int64_t>(threads, config_.batch_size)
                 : 1;
  }
  shards_ = std::make_unique<ShardPool>(static_cast<int>(shards),
                                        std::max(1, threads / static_cast<int>(shards)));
  optimizer_->SetParallel(
      shards_->size(),
      [pool = shards_.get()](const std::function<void(int)>& part) { pool->Run(part); });
  *log_ << "spheret-lm: " << nn::MethodId(config_.connection.method) << ", " << config_.n_layer
        << " layers x " << config_.n_embd << " wide, " << model_->num_parameters() / 1e6
        << "M parameters, vocab " << vocab_size << ", " << threads << " threads"
        << (shards > 1 ? " as " + std::to_string(shards) + " batch shards" : std::string()) << ", "
        << world_size_ << (world_size_ == 1 ? " process" : " ranks") << std::endl;
  return "";
}

std::string Run::Resume(bool* resumed) {
  *resumed = false;
  const std::string path = CheckpointPath(options_.out_dir);
  std::error_code ec;
  if (!options_.resume || !fs::exists(path, ec)) return "";
  TrainState saved;
  if (std::string error = LoadCheckpoint(path, state_.config, *model_, optimizer_.get(), &saved);
      !error.empty()) {
    return error;
  }
  generator_.set_state(saved.data_rng);
  at::Generator dropout_rng = at::detail::getDefaultCPUGenerator();  // shares the global state
  dropout_rng.set_state(saved.torch_rng);
  saved.config = state_.config;
  state_ = std::move(saved);
  *log_ << "spheret-lm: resumed from " << path << " at step " << state_.step << std::endl;
  *resumed = true;
  return "";
}

std::string Run::StartHistory(bool resumed) {
  if (rank_ != 0) return "";
  std::vector<std::string> kept;
  const std::string path = options_.out_dir + "/" + protocol::kEventsFile;
  if (std::string error = history_.Open(path, resumed ? state_.step : -1, &kept); !error.empty()) {
    return error;
  }
  if (options_.replay_events) {
    for (const std::string& line : kept) events_->EmitRaw(line);
  }
  events_->RecordTo(&history_);
  return "";
}

std::pair<torch::Tensor, torch::Tensor> Run::Batch(const TokenFile& tokens,
                                                   torch::Generator& generator) {
  auto [x, y] = SampleBatch(tokens, config_.batch_size, config_.block_size, generator);
  return {x.to(device_), y.to(device_)};
}

torch::Tensor Run::Loss(const torch::Tensor& x, const torch::Tensor& y) {
  CudaAutocast autocast(autocast_);
  return model_->loss(x, y);
}

torch::Tensor Run::Backward(const torch::Tensor& x, const torch::Tensor& y, double divisor) {
  const int n = shards_->size();
  if (n == 1) {
    const torch::Tensor loss = Loss(x, y) / divisor;
    loss.backward();
    return loss.detach().to(torch::kDouble);
  }
  const int64_t rows = x.size(0);
  std::vector<torch::Tensor> losses(n);
  std::vector<std::vector<torch::Tensor>> grads(n);
  shards_->Run([&](int s) {
    const auto [begin, count] = ShardRows(rows, n, s);
    const torch::Tensor loss = Loss(x.narrow(0, begin, count), y.narrow(0, begin, count)) *
                               (static_cast<double>(count) / static_cast<double>(rows)) / divisor;
    grads[s] = torch::autograd::grad({loss}, params_, /*grad_outputs=*/{}, /*retain_graph=*/false,
                                     /*create_graph=*/false, /*allow_unused=*/true);
    losses[s] = loss.detach();
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

double Run::EvalLoss(const torch::Tensor& x, const torch::Tensor& y) {
  const int n = shards_->size();
  if (n == 1) return Loss(x, y).item<double>();
  const int64_t rows = x.size(0);
  std::vector<double> losses(n);
  shards_->Run([&](int s) {
    torch::NoGradGuard no_grad;
    const auto [begin, count] = ShardRows(rows, n, s);
    losses[s] = Loss(x.narrow(0, begin, count), y.narrow(0, begin, count)).item<double>() *
                static_cast<double>(count) / static_cast<double>(rows);
  });
  double total = 0;
  for (double loss : losses) total += loss;
  return total;
}

double Run::EstimateLoss(const TokenFile& tokens, int64_t step) {
  torch::NoGradGuard no_grad;
  model_->eval();
  torch::Generator generator =
      at::detail::createCPUGenerator(SideSeed(config_.seed, SideStream::kEval, step));
  double total = 0;
  for (int64_t k = 0; k < config_.eval_iters; ++k) {
    auto [x, y] = Batch(tokens, generator);
    total += EvalLoss(x, y);
  }
  model_->train();
  return total / static_cast<double>(config_.eval_iters);
}

void Run::EmitDiagnostics(int64_t step) {
  torch::NoGradGuard no_grad;
  // A batch of its own, from a generator of its own: diagnostics leave the run's RNG untouched.
  torch::Generator generator =
      at::detail::createCPUGenerator(SideSeed(config_.seed, SideStream::kDiag, step));
  const torch::Tensor x = Batch(train_, generator).first;
  CudaAutocast autocast(autocast_);
  std::vector<nn::ConnectionDiagnostics> diagnostics;
  model_->forward(x, &diagnostics);
  for (size_t i = 0; i < diagnostics.size(); ++i) {
    const nn::ConnectionDiagnostics& d = diagnostics[i];
    protocol::DiagEvent diag;
    diag.step = step;
    diag.layer = static_cast<int64_t>(i / 2 + 1);
    diag.sublayer = i % 2 == 0 ? "attn" : "mlp";
    diag.hidden_norm = d.hidden_norm;
    diag.theta = d.theta;
    diag.alpha = d.alpha ? *d.alpha : std::nan("");
    diag.radial = d.radial;
    events_->Emit(diag);
  }
}

std::string Run::Checkpoint() {
  if (rank_ != 0) return "";
  state_.data_rng = generator_.get_state();
  state_.torch_rng = at::detail::getDefaultCPUGenerator().get_state();
  const std::string path = CheckpointPath(options_.out_dir);
  history_.Sync();  // the events up to this checkpoint are durable before it is
  if (std::string error = SaveCheckpoint(path, *model_, *optimizer_, state_); !error.empty()) {
    return error;
  }
  events_->Emit(protocol::CheckpointEvent{state_.step, path});
  return "";
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

double Run::TrainStep(double lr, double* grad_norm) {
  for (auto& group : optimizer_->param_groups()) group.options().set_lr(lr);
  // Every rank draws every micro-batch of the global batch from the same generator and trains
  // on its own share, so the global batch (and the RNG) is that of one process.
  const int64_t micro_steps = config_.gradient_accumulation_steps;
  torch::Tensor step_loss = torch::zeros({}, torch::TensorOptions(torch::kDouble).device(device_));
  for (int64_t micro = 0; micro < micro_steps; ++micro) {
    auto [x, y] = SampleBatch(train_, config_.batch_size, config_.block_size, generator_);
    if (micro % world_size_ != rank_) continue;
    step_loss +=
        Backward(x.to(device_), y.to(device_), static_cast<double>(micro_steps / world_size_));
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
  return step_loss.item<double>();
}

double Run::TimedStep(int64_t step) {
  const double lr = LearningRate(step, Schedule());
  const Clock::time_point start = Clock::now();
  double grad_norm = 0;
  TrainStep(lr, &grad_norm);
  return std::chrono::duration<double>(Clock::now() - start).count();
}

TrainResult Run::Loop(bool resumed) {
  TrainResult result;
  const ScheduleOptions schedule = Schedule();
  const int64_t tokens_per_step =
      config_.batch_size * config_.block_size * config_.gradient_accumulation_steps;
  const Clock::time_point start = Clock::now();
  const int64_t first = state_.step;
  // A resumed run already evaluated and checkpointed at its first step before it stopped.
  for (int64_t step = first;; ++step) {
    const bool at_end = step >= config_.max_iters;
    if (!(resumed && step == first) && (step % config_.eval_interval == 0 || at_end)) {
      state_.val_loss = EstimateLoss(val_, step);
      events_->Metric(step, protocol::kValLoss, state_.val_loss);
      events_->Metric(step, protocol::kValPpl, std::exp(state_.val_loss));
      *log_ << "step " << step << ": val loss " << state_.val_loss << std::endl;
      if (step > 0 && (step % config_.checkpoint_interval == 0 || at_end)) {
        if (std::string error = Checkpoint(); !error.empty()) {
          result.error = error;
          return result;
        }
      }
    }
    if (at_end) break;
    if (config_.diag_interval > 0 && step % config_.diag_interval == 0) EmitDiagnostics(step);
    const double lr = LearningRate(step, schedule);
    const Clock::time_point step_start = Clock::now();
    double grad_norm = 0;
    const double step_loss = TrainStep(lr, &grad_norm);
    state_.step = step + 1;
    state_.loss_window.push_back(step_loss);
    if (state_.loss_window.size() > kLossWindow)
      state_.loss_window.erase(state_.loss_window.begin());
    result.train_loss_avg = state_.LossAverage();
    if (!std::isfinite(step_loss) || step_loss > config_.divergence_loss) {
      events_->Emit(protocol::DivergedEvent{step, step_loss, config_.divergence_loss});
      *log_ << "step " << step << ": loss " << step_loss << " diverged" << std::endl;
      result.outcome = TrainOutcome::kDiverged;
      result.steps = state_.step;
      return result;
    }
    if (step % config_.log_interval == 0) {
      const double seconds = std::chrono::duration<double>(Clock::now() - step_start).count();
      const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
      const double tokens_per_sec = tokens_per_step / std::max(seconds, 1e-9);
      events_->Metric(step, protocol::kTrainLoss, step_loss);
      events_->Metric(step, protocol::kTrainLossAvg, result.train_loss_avg);
      events_->Metric(step, protocol::kLearningRate, lr);
      events_->Metric(step, protocol::kGradNorm, grad_norm);
      events_->Metric(step, protocol::kTokensPerSec, tokens_per_sec);
      const int64_t done = step + 1 - first, left = config_.max_iters - step - 1;
      char line[160];
      std::snprintf(line, sizeof(line),
                    "step %lld/%lld | loss %.4f (avg %.4f) | lr %.2e | %.0f tok/s | eta %s",
                    static_cast<long long>(step + 1), static_cast<long long>(config_.max_iters),
                    step_loss, result.train_loss_avg, lr, tokens_per_sec,
                    FormatDuration(elapsed / done * left).c_str());
      *log_ << line << std::endl;
    }
    if (StopRequested()) {
      *log_ << "step " << state_.step << ": stop requested, checkpointing" << std::endl;
      if (std::string error = Checkpoint(); !error.empty()) {
        result.error = error;
        return result;
      }
      events_->Emit(protocol::StoppedEvent{state_.step});
      result.steps = state_.step;
      result.outcome = TrainOutcome::kStopped;
      return result;
    }
  }
  result.steps = state_.step;
  result.train_loss_avg = state_.LossAverage();
  result.val_loss = state_.val_loss;
  events_->Emit(protocol::DoneEvent{result.steps, result.train_loss_avg, result.val_loss,
                                     std::exp(result.val_loss)});
  result.outcome = TrainOutcome::kDone;
  return result;
}

}  // namespace

nn::GptConfig ModelConfig(const TrainConfig& config, int64_t vocab_size) {
  nn::GptConfig gpt;
  gpt.vocab_size = vocab_size;
  gpt.block_size = config.block_size;
  gpt.n_layer = config.n_layer;
  gpt.n_head = config.n_head;
  gpt.n_embd = config.n_embd;
  gpt.dropout = config.dropout;
  gpt.bias = config.bias;
  gpt.connection = config.connection;
  return gpt;
}

std::string ResolveDatasetDir(const TrainConfig& config) {
  std::error_code ec;
  if (fs::is_directory(config.dataset, ec)) return config.dataset;
  return (fs::path(config.data_root) / config.dataset).string();
}

std::string CompareStepTimes(const std::vector<TrainConfig>& configs, int64_t warmup, int64_t steps,
                             const std::string& scratch_dir, std::vector<double>* median_seconds) {
  std::ostream quiet(nullptr);
  EventWriter no_events(&quiet);
  std::vector<TrainOptions> options(configs.size());
  std::vector<std::unique_ptr<Run>> runs;
  for (size_t i = 0; i < configs.size(); ++i) {
    options[i].out_dir = scratch_dir + "/" + std::to_string(i);
    runs.push_back(std::make_unique<Run>(configs[i], options[i], &no_events, &quiet));
    if (std::string error = runs.back()->Open(); !error.empty()) return error;
  }
  std::vector<std::vector<double>> seconds(configs.size());
  for (int64_t step = 0; step < warmup + steps; ++step) {
    // The order rotates: the first of a round runs measurably slower (measured: ~3% with nine
    // copies of one config), so every run takes every place equally often.
    for (size_t k = 0; k < runs.size(); ++k) {
      const size_t i = (k + static_cast<size_t>(step)) % runs.size();
      const double s = runs[i]->TimedStep(step);
      if (step >= warmup) seconds[i].push_back(s);
    }
  }
  median_seconds->clear();
  for (std::vector<double>& s : seconds) {
    std::sort(s.begin(), s.end());
    median_seconds->push_back(s.empty() ? 0.0 : s[s.size() / 2]);
  }
  return "";
}

TrainResult Train(const TrainConfig& config, const TrainOptions& options, EventWriter* events,
                  std::ostream* log) {
  Run run(config, options, events, log);
  TrainResult result;
  bool resumed = false;
  if (std::string error = run.Open(); !error.empty()) {
    result.error = error;
    return result;
  }
  if (std::string error = run.Resume(&resumed); !error.empty()) {
    result.error = error;
    return result;
  }
  if (std::string error = run.StartHistory(resumed); !error.empty()) {
    result.error = error;
    return result;
  }
  TrainResult done = run.Loop(resumed);
  events->RecordTo(nullptr);  // the history ends with the run
  return done;
}

}  // namespace spheret::train
