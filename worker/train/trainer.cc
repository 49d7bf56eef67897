#include "worker/train/trainer.h"

#include <algorithm>
#include <filesystem>

#include "base/status_macros.h"
#include "protocol/trainer_events.h"
#include "worker/train/run.h"

namespace spheret::train {
namespace fs = std::filesystem;
namespace {

// Stops recording into a run's history on every way out of Train (return or exception).
class HistoryRegistration {
 public:
  explicit HistoryRegistration(EventWriter* events) : events_(events) {}
  ~HistoryRegistration() { events_->RecordTo(nullptr); }
  HistoryRegistration(const HistoryRegistration&) = delete;
  HistoryRegistration& operator=(const HistoryRegistration&) = delete;

 private:
  EventWriter* events_;
};

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
  gpt.fused_norm = config.fused_norm;
  gpt.fused_attention = config.fused_attention;
  gpt.fused_mlp = config.fused_mlp;
  gpt.pos_encoding = config.pos_encoding;
  gpt.connection = config.connection;
  gpt.loops = config.loops;
  gpt.per_loop_loss = config.per_loop_loss;
  if (config.per_loop_loss) gpt.loop_loss_weights = LoopLossWeights(config);
  gpt.norm_penalty = config.norm_penalty;
  gpt.inter_loop_norm = config.inter_loop_norm;
  return gpt;
}

std::string ResolveDatasetDir(const TrainConfig& config) {
  std::error_code ec;
  if (fs::is_directory(config.dataset, ec)) return config.dataset;
  return (fs::path(config.data_root) / config.dataset).string();
}

absl::Status CompareStepTimes(const std::vector<TrainConfig>& configs, int64_t warmup,
                              int64_t steps, const std::string& scratch_dir,
                              std::vector<double>* median_seconds) {
  std::ostream quiet(nullptr);
  EventWriter no_events(&quiet);
  std::vector<TrainOptions> options(configs.size());
  std::vector<std::unique_ptr<Run>> runs;
  for (size_t i = 0; i < configs.size(); ++i) {
    options[i].out_dir = scratch_dir + "/" + std::to_string(i);
    runs.push_back(std::make_unique<Run>(configs[i], options[i], &no_events, &quiet));
    SPHERET_RETURN_IF_ERROR(runs.back()->Open());
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
  return absl::OkStatus();
}

TrainResult Train(const TrainConfig& config, const TrainOptions& options, EventWriter* events,
                  std::ostream* log) {
  Run run(config, options, events, log);
  // The history dies with `run`; the writer lives on (spheret-lm writes its error through it).
  const HistoryRegistration registration(events);
  TrainResult result;
  try {
    bool resumed = false;
    result.status = run.Open();
    if (result.status.ok()) result.status = run.Resume(&resumed);
    if (result.status.ok()) result.status = run.StartHistory(resumed);
    if (!result.status.ok()) return result;
    return run.Loop(resumed);
  } catch (const std::exception& e) {  // LibTorch (a bad index, out of memory), data errors
    result = TrainResult{};
    result.status = absl::InternalError(ExceptionMessage(e));
  } catch (...) {
    result = TrainResult{};
    result.status = absl::InternalError("unknown exception in the training loop");
  }
  return result;
}

}  // namespace spheret::train
