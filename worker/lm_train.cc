#include "worker/lm_train.h"

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "config/connection_options.h"
#include "config/connection_script.h"
#include "config/train_config.h"
#include "worker/lm_fail.h"
#include "worker/lm_zero_shot.h"
#include "worker/train/communicator.h"
#include "worker/train/dataset.h"
#include "worker/train/hf_gpt2.h"
#include "worker/train/run_folder.h"
#include "worker/train/trainer.h"

namespace spheret::lm {
namespace {

using protocol::kExitDiverged;
using protocol::kExitStopped;
using train::EventWriter;

// Reads an integer environment variable; InvalidArgument naming it when it is not one.
absl::Status IntFromEnv(const char* name, int fallback, int* value) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') {
    *value = fallback;
    return absl::OkStatus();
  }
  char* end = nullptr;
  const long parsed = std::strtol(text, &end, 10);
  if (*end != '\0' || parsed < 0 || parsed > 1 << 20) {
    return absl::InvalidArgumentError(absl::StrCat(
        "environment variable ", name, " must be a non-negative integer, got '", text, "'"));
  }
  *value = static_cast<int>(parsed);
  return absl::OkStatus();
}

// The torchrun-style rendezvous variables: WORLD_SIZE, RANK, LOCAL_RANK, MASTER_ADDR, MASTER_PORT.
absl::Status DistributedFromEnv(train::DistributedOptions* options) {
  SPHERET_RETURN_IF_ERROR(IntFromEnv("WORLD_SIZE", 1, &options->world_size));
  SPHERET_RETURN_IF_ERROR(IntFromEnv("RANK", 0, &options->rank));
  SPHERET_RETURN_IF_ERROR(IntFromEnv("LOCAL_RANK", 0, &options->local_rank));
  SPHERET_RETURN_IF_ERROR(IntFromEnv("MASTER_PORT", 29500, &options->master_port));
  if (const char* addr = std::getenv("MASTER_ADDR"); addr != nullptr && *addr != '\0') {
    options->master_addr = addr;
  }
  if (const char* name = std::getenv("GLOO_SOCKET_IFNAME"); name != nullptr) {
    options->network_interface = name;
  }
  if (options->world_size < 1 || options->rank >= options->world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "RANK (", options->rank, ") must be below WORLD_SIZE (", options->world_size, ")"));
  }
  if (options->master_port < 1 || options->master_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("MASTER_PORT must be in [1, 65535], got ", options->master_port));
  }
  return absl::OkStatus();
}

// The config of the --config file as it enters the process (no keys set without one).
absl::Status ReadConfigArg(const TrainArgs& args, TrainConfig* config) {
  if (args.config_path.empty()) return absl::OkStatus();
  return train::ApplyConfigFile(args.config_path, "cannot read config file " + args.config_path,
                                config);
}

// `base` (the --config file's), the --set overrides, then `extra` overrides, and --data-root;
// finalized.
absl::Status BuildConfig(const TrainConfig& base, const TrainArgs& args,
                         const std::vector<std::string>& extra, TrainConfig* config) {
  *config = base;
  for (const auto* list : {&args.sets, &extra}) {
    for (const std::string& assignment : *list) {
      if (absl::Status error = ApplyConfigOverride(assignment, config); !error.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("--set ", error.message()));
      }
    }
  }
  if (!args.data_root.empty()) config->data_root = args.data_root;
  SPHERET_RETURN_IF_ERROR(FinalizeConfig(config));
  SPHERET_RETURN_IF_ERROR(LoadConnectionScript(config));
  if (!config->eval_tasks.empty()) {  // refused before training, not after it
    SPHERET_RETURN_IF_ERROR(ResolveEvalDataDir(*config).status());
  }
  return train::ApplyInitFromShape(config);
}

// The built-in methods: scripted needs its file (--methods scripted+connection=FILE).
std::vector<std::string> BuiltInMethodIds() {
  std::vector<std::string> ids;
  for (const std::string& id : MethodIds()) {
    if (ParseMethod(id) != Method::kScripted) ids.push_back(id);
  }
  return ids;
}

// The config of each --methods entry, "method+key=value+...": the method, then overrides of
// the entry's own.
absl::Status BenchConfigs(const BenchArgs& args, std::vector<TrainConfig>* configs) {
  TrainConfig base;
  SPHERET_RETURN_IF_ERROR(ReadConfigArg(args.train, &base));
  configs->resize(args.methods.size());
  for (size_t i = 0; i < configs->size(); ++i) {
    std::vector<std::string> sets = absl::StrSplit(args.methods[i], '+');
    sets.front() = "method=" + sets.front();
    if (absl::Status error = BuildConfig(base, args.train, sets, &(*configs)[i]); !error.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--methods ", args.methods[i], ": ", error.message()));
    }
  }
  return absl::OkStatus();
}

void PrintBenchTable(const BenchArgs& args, const std::vector<TrainConfig>& configs,
                     const std::vector<double>& seconds) {
  const TrainConfig& base = configs.front();
  const double tokens =
      static_cast<double>(base.batch_size * base.block_size * base.gradient_accumulation_steps);
  std::printf("%lld x %lld x %lld wide, block %lld, batch %lld x %lld, median of %lld steps\n",
              static_cast<long long>(base.n_layer), static_cast<long long>(base.n_head),
              static_cast<long long>(base.n_embd), static_cast<long long>(base.block_size),
              static_cast<long long>(base.batch_size),
              static_cast<long long>(base.gradient_accumulation_steps),
              static_cast<long long>(args.steps));
  std::printf("%-40s %10s %10s %10s\n", "method", "step ms", "tokens/s",
              ("vs " + args.methods.front()).c_str());
  for (size_t i = 0; i < configs.size(); ++i) {
    std::printf("%-40s %10.2f %10.0f %9.3fx\n", args.methods[i].c_str(), seconds[i] * 1e3,
                tokens / seconds[i], seconds[i] / seconds.front());
  }
}

// Step times of each method side by side in this process; a table on stdout.
int RunBench(const BenchArgs& args, EventWriter& events) {
  std::vector<TrainConfig> configs;
  if (absl::Status error = BenchConfigs(args, &configs); !error.ok()) return Fail(events, error);
  std::error_code ec;
  const std::filesystem::path scratch =
      std::filesystem::temp_directory_path(ec) / ("spheret-lm-bench-" + std::to_string(getpid()));
  std::cerr << "spheret-lm: " << configs.size() << " models side by side, a step of each in turn, "
            << args.warmup << " warm-up + " << args.steps << " timed steps" << std::endl;
  std::vector<double> seconds;
  const absl::Status error =
      train::CompareStepTimes(configs, args.warmup, args.steps, scratch.string(), &seconds);
  std::filesystem::remove_all(scratch, ec);
  if (!error.ok()) return Fail(events, error);
  PrintBenchTable(args, configs, seconds);
  return 0;
}

// The effective config on stderr, and what a reader should know about its choices.
void LogConfig(const TrainConfig& config) {
  std::cerr << "spheret-lm: config " << ConfigToJson(config).dump() << std::endl;
  for (const std::string& note : ConnectionNotes(config.connection, config.n_layer)) {
    std::cerr << "spheret-lm: note: " << note << std::endl;
  }
}

// This rank's place in the gang (WORLD_SIZE and friends), and with more than one rank the
// process group it joined into `communicator`.
absl::Status JoinRanks(const TrainConfig& config, train::DistributedOptions* distributed,
                       std::unique_ptr<train::Communicator>* communicator) {
  SPHERET_RETURN_IF_ERROR(DistributedFromEnv(distributed));
  if (config.device != "cpu") distributed->backend = train::CollectiveBackend::kNccl;
  if (distributed->world_size == 1) return absl::OkStatus();
  SPHERET_ASSIGN_OR_RETURN(*communicator, train::JoinProcessGroup(*distributed));
  return absl::OkStatus();
}

train::TrainOptions OptionsOf(const TrainArgs& args, train::Communicator* communicator,
                              int local_rank, const std::atomic<bool>* stop) {
  train::TrainOptions options;
  options.out_dir = args.out;
  options.resume = args.resume;
  options.communicator = communicator;
  options.local_rank = local_rank;
  options.stop = stop;
  options.replay_events = args.replay_events;
  return options;
}

// The exit code of a training run that ended with `result`.
int ExitCode(const train::TrainResult& result, EventWriter& events) {
  switch (result.outcome) {
    case train::TrainOutcome::kDone:
      std::cerr << "spheret-lm: done after " << result.steps << " steps: train loss (avg) "
                << result.train_loss_avg << ", val loss " << result.val_loss << std::endl;
      return 0;
    case train::TrainOutcome::kDiverged:
      return kExitDiverged;
    case train::TrainOutcome::kStopped:
      std::cerr << "spheret-lm: stopped by a signal after " << result.steps
                << " steps; checkpointed (continue with --resume)" << std::endl;
      return kExitStopped;
    case train::TrainOutcome::kError:
      break;
  }
  return Fail(events, result.status);
}

int RunTrain(const TrainArgs& args, std::atomic<bool>* stop, void (*on_stop_signal)(int),
             EventWriter& events) {
  TrainConfig file, config;
  absl::Status error = ReadConfigArg(args, &file);
  if (error.ok()) error = BuildConfig(file, args, {}, &config);
  if (!error.ok()) return Fail(events, error);
  LogConfig(config);
  train::DistributedOptions distributed;
  std::unique_ptr<train::Communicator> communicator;
  if (error = JoinRanks(config, &distributed, &communicator); !error.ok()) {
    return Fail(events, error);
  }
  std::signal(SIGTERM, on_stop_signal);
  std::signal(SIGINT, on_stop_signal);
  train::TrainOptions options = OptionsOf(args, communicator.get(), distributed.local_rank, stop);
  const bool zero_shot = !config.eval_tasks.empty();
  if (zero_shot && config.eval_every == "checkpoints") {
    if (distributed.world_size > 1) {
      return Fail(events,
                  "eval_every: checkpoints needs one process (rank 0 would evaluate while "
                  "the other ranks wait); use eval_every: final");
    }
    // A stopped eval leaves `stop` raised: the run stops after its next step, checkpointed.
    options.after_checkpoint = [&](int64_t step) {
      EvaluateTrainedRun(config, args.out, step, stop, events, std::cerr);
    };
  }
  const train::TrainResult result = Train(config, options, &events, &std::cerr);
  if (result.outcome == train::TrainOutcome::kDone && zero_shot && config.eval_every == "final" &&
      distributed.rank == 0 &&
      !EvaluateTrainedRun(config, args.out, result.steps, stop, events, std::cerr)) {
    events.Emit(protocol::StoppedEvent{result.steps});
    std::cerr << "spheret-lm: stopped by a signal during the zero-shot eval after " << result.steps
              << " steps; --resume evaluates again" << std::endl;
    return kExitStopped;
  }
  return ExitCode(result, events);
}

void AddTrainCommand(CLI::App& app, TrainCommands* c) {
  TrainArgs& train = c->train;
  c->train_command = app.add_subcommand("train", "train a model; events on stdout");
  CLI::App* cmd = c->train_command;
  cmd->add_option("--config", train.config_path, "JSON config file")->check(CLI::ExistingFile);
  cmd->add_option("--out", train.out, "run folder (config.json)")->required();
  cmd->add_option("--set", train.sets, "override a config key: key=value (repeatable)");
  cmd->add_option("--data-root", train.data_root, "folder of named datasets (default data/)");
  cmd->add_flag("--resume", train.resume, "continue from the run folder's checkpoint, if any");
  cmd->add_flag("--replay-events", train.replay_events,
                "with --resume: first print the run's events up to the checkpoint again "
                "(from OUT/events.jsonl)");
}

void AddBenchCommand(CLI::App& app, TrainCommands* c) {
  BenchArgs& bench = c->bench;
  bench.methods = BuiltInMethodIds();
  c->bench_command = app.add_subcommand(
      "bench", "step time of each method side by side in one process (a table on stdout)");
  CLI::App* cmd = c->bench_command;
  cmd->add_option("--config", bench.train.config_path, "JSON config file")
      ->check(CLI::ExistingFile);
  cmd->add_option("--set", bench.train.sets, "override a config key: key=value (repeatable)");
  cmd->add_option("--data-root", bench.train.data_root, "folder of named datasets");
  cmd->add_option("--methods", bench.methods,
                  "methods to compare, the first the baseline; an entry may add its own keys: "
                  "pre_ln+loops=2+per_loop_loss=true")
      ->delimiter(',');
  cmd->add_option("--steps", bench.steps, "timed steps per method")->check(CLI::PositiveNumber);
  cmd->add_option("--warmup", bench.warmup, "untimed steps first")->check(CLI::NonNegativeNumber);
}

}  // namespace

void AddTrainCommands(CLI::App& app, TrainCommands* commands) {
  AddTrainCommand(app, commands);
  AddBenchCommand(app, commands);
}

int RunTrainCommand(const TrainCommands& commands, std::atomic<bool>* stop,
                    void (*on_stop_signal)(int), EventWriter& events) {
  if (*commands.bench_command) return RunBench(commands.bench, events);
  if (*commands.train_command) return RunTrain(commands.train, stop, on_stop_signal, events);
  return -1;
}

}  // namespace spheret::lm
