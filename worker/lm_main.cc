// spheret-lm: the trainer. Runs standalone like nanoGPT's train.py, or under spheret-worker.
//
//   spheret-lm prepare --builtin fortunes --out data/fortunes
//   spheret-lm prepare --input corpus/ --out data/mycorpus [--gpt2 gpt2-tokenizer/]
//                      [--text-field text] [--threads N] [--val-fraction F] [--split-seed S]
//   spheret-lm check-data --data data/mycorpus
//   spheret-lm sample --run runs/x [--prompt TEXT] [--tokens 200] [--temperature 0.8] [--top-k 200]
//   spheret-lm eval --run runs/x --tasks arc_easy,hellaswag,... --data zeroshot/ [--step N]
//                   [--dump-requests FILE] [--device cuda]
//   spheret-lm score --run runs/x --requests requests.jsonl [--out answers.jsonl]
//   spheret-lm export --run runs/x --format hf-gpt2 --out hf/x
//   spheret-lm logits --run runs/x --ids ids.json --out logits.npy
//   spheret-lm train --config run.json --out runs/x [--set key=value ...] [--data-root data]
//                    [--resume]
//   spheret-lm bench --config run.json [--set key=value ...] [--methods pre_ln,geonorm,...]
//                    [--steps 40] [--warmup 10]
//                    (an entry may add keys of its own: pre_ln+loops=2+per_loop_loss=true)
//
// With WORLD_SIZE > 1 (and RANK, LOCAL_RANK, MASTER_ADDR, MASTER_PORT, as torchrun sets them) the
// ranks train one model data-parallel over c10d: Gloo on CPU, NCCL with device cuda; rank 0
// writes events and checkpoints.
//
// Events are JSON lines on stdout; logs and progress go to stderr. Exit codes: 0 done, 1 error
// (an "error" event names it), 2 bad command line, 3 diverged, 4 stopped by SIGTERM/SIGINT (it
// checkpointed at a step boundary and wrote a "stopped" event; --resume continues).
#include <malloc.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "config/connection_options.h"
#include "config/connection_script.h"
#include "config/train_config.h"
#include "config/trial_config.h"
#include "worker/lm_check_data.h"
#include "worker/lm_export.h"
#include "worker/lm_fail.h"
#include "worker/lm_prepare.h"
#include "worker/lm_zero_shot.h"
#include "worker/train/communicator.h"
#include "worker/train/dataset.h"
#include "worker/train/events.h"
#include "worker/train/hf_gpt2.h"
#include "worker/train/sample.h"
#include "worker/train/trainer.h"

namespace {

using spheret::train::EventWriter;

using spheret::lm::Fail;
using spheret::protocol::kExitDiverged;
using spheret::protocol::kExitStopped;
using spheret::protocol::kExitUsage;

std::atomic<bool> g_stop{false};
void OnStopSignal(int) { g_stop = true; }

struct TrainArgs {
  std::string config_path;
  std::string out;
  std::vector<std::string> sets;
  std::string data_root;
  bool resume = false;
  bool replay_events = false;
};

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
absl::Status DistributedFromEnv(spheret::train::DistributedOptions* options) {
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

// The config of --config, the --set overrides, then `extra` overrides, and --data-root; finalized.
absl::Status BuildConfig(const TrainArgs& args, const std::vector<std::string>& extra,
                         spheret::TrainConfig* config) {
  if (!args.config_path.empty()) {
    std::ifstream in(args.config_path);
    if (!in) return absl::InvalidArgumentError("cannot read config file " + args.config_path);
    std::ostringstream text;
    text << in.rdbuf();
    const spheret::TrialConfig view(text.str());
    SPHERET_RETURN_IF_ERROR(spheret::Annotate(args.config_path, view.ApplyTo(config)));
  }
  for (const auto* list : {&args.sets, &extra}) {
    for (const std::string& assignment : *list) {
      if (absl::Status error = ApplyConfigOverride(assignment, config); !error.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("--set ", error.message()));
      }
    }
  }
  if (!args.data_root.empty()) config->data_root = args.data_root;
  SPHERET_RETURN_IF_ERROR(FinalizeConfig(config));
  SPHERET_RETURN_IF_ERROR(spheret::LoadConnectionScript(config));
  if (!config->eval_tasks.empty()) {  // refused before training, not after it
    SPHERET_RETURN_IF_ERROR(spheret::ResolveEvalDataDir(*config).status());
  }
  return spheret::train::ApplyInitFromShape(config);
}

// The built-in methods: scripted needs its file (--methods scripted+connection=FILE).
std::vector<std::string> BuiltInMethodIds() {
  std::vector<std::string> ids;
  for (const std::string& id : spheret::MethodIds()) {
    if (spheret::ParseMethod(id) != spheret::Method::kScripted) ids.push_back(id);
  }
  return ids;
}

struct BenchArgs {
  TrainArgs train;  // config_path, sets, data_root
  std::vector<std::string> methods = BuiltInMethodIds();
  int64_t steps = 40, warmup = 10;
};

// Step times of each method side by side in this process; a table on stdout.
int RunBench(const BenchArgs& args, EventWriter& events) {
  std::vector<spheret::TrainConfig> configs(args.methods.size());
  for (size_t i = 0; i < configs.size(); ++i) {
    // "method+key=value+...": the method, then overrides of this entry's own.
    std::vector<std::string> sets = absl::StrSplit(args.methods[i], '+');
    sets.front() = "method=" + sets.front();
    if (absl::Status error = BuildConfig(args.train, sets, &configs[i]); !error.ok()) {
      return Fail(events, absl::InvalidArgumentError(
                              absl::StrCat("--methods ", args.methods[i], ": ", error.message())));
    }
  }
  std::error_code ec;
  const std::filesystem::path scratch =
      std::filesystem::temp_directory_path(ec) / ("spheret-lm-bench-" + std::to_string(getpid()));
  std::cerr << "spheret-lm: " << configs.size() << " models side by side, a step of each in turn, "
            << args.warmup << " warm-up + " << args.steps << " timed steps" << std::endl;
  std::vector<double> seconds;
  const absl::Status error = spheret::train::CompareStepTimes(configs, args.warmup, args.steps,
                                                              scratch.string(), &seconds);
  std::filesystem::remove_all(scratch, ec);
  if (!error.ok()) return Fail(events, error);
  const spheret::TrainConfig& base = configs.front();
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
  return 0;
}

spheret::train::TrainOptions OptionsOf(const TrainArgs& args,
                                       spheret::train::Communicator* communicator, int local_rank) {
  spheret::train::TrainOptions options;
  options.out_dir = args.out;
  options.resume = args.resume;
  options.communicator = communicator;
  options.local_rank = local_rank;
  options.stop = &g_stop;
  options.replay_events = args.replay_events;
  return options;
}

// The effective config on stderr, and what a reader should know about its choices.
void LogConfig(const spheret::TrainConfig& config) {
  std::cerr << "spheret-lm: config " << ConfigToJson(config).dump() << std::endl;
  for (const std::string& note : ConnectionNotes(config.connection, config.n_layer)) {
    std::cerr << "spheret-lm: note: " << note << std::endl;
  }
}

int RunTrain(const TrainArgs& args, EventWriter& events) {
  spheret::TrainConfig config;
  if (absl::Status error = BuildConfig(args, {}, &config); !error.ok()) {
    return Fail(events, error);
  }
  LogConfig(config);
  spheret::train::DistributedOptions distributed;
  if (absl::Status error = DistributedFromEnv(&distributed); !error.ok()) {
    return Fail(events, error);
  }
  std::unique_ptr<spheret::train::Communicator> communicator;
  if (config.device != "cpu") distributed.backend = spheret::train::CollectiveBackend::kNccl;
  if (distributed.world_size > 1) {
    absl::StatusOr<std::unique_ptr<spheret::train::Communicator>> joined =
        spheret::train::JoinProcessGroup(distributed);
    if (!joined.ok()) return Fail(events, joined.status());
    communicator = std::move(*joined);
  }
  std::signal(SIGTERM, OnStopSignal);
  std::signal(SIGINT, OnStopSignal);
  spheret::train::TrainOptions options =
      OptionsOf(args, communicator.get(), distributed.local_rank);
  const bool zero_shot = !config.eval_tasks.empty();
  if (zero_shot && config.eval_every == "checkpoints") {
    if (distributed.world_size > 1) {
      return Fail(events,
                  "eval_every: checkpoints needs one process (rank 0 would evaluate while "
                  "the other ranks wait); use eval_every: final");
    }
    // A stopped eval leaves g_stop raised: the run stops after its next step, checkpointed.
    options.after_checkpoint = [&](int64_t step) {
      spheret::lm::EvaluateTrainedRun(config, args.out, step, &g_stop, events, std::cerr);
    };
  }
  const spheret::train::TrainResult result = Train(config, options, &events, &std::cerr);
  if (result.outcome == spheret::train::TrainOutcome::kDone && zero_shot &&
      config.eval_every == "final" && distributed.rank == 0 &&
      !spheret::lm::EvaluateTrainedRun(config, args.out, result.steps, &g_stop, events,
                                       std::cerr)) {
    events.Emit(spheret::protocol::StoppedEvent{result.steps});
    std::cerr << "spheret-lm: stopped by a signal during the zero-shot eval after " << result.steps
              << " steps; --resume evaluates again" << std::endl;
    return kExitStopped;
  }
  switch (result.outcome) {
    case spheret::train::TrainOutcome::kDone:
      std::cerr << "spheret-lm: done after " << result.steps << " steps: train loss (avg) "
                << result.train_loss_avg << ", val loss " << result.val_loss << std::endl;
      return 0;
    case spheret::train::TrainOutcome::kDiverged:
      return kExitDiverged;
    case spheret::train::TrainOutcome::kStopped:
      std::cerr << "spheret-lm: stopped by a signal after " << result.steps
                << " steps; checkpointed (continue with --resume)" << std::endl;
      return kExitStopped;
    case spheret::train::TrainOutcome::kError:
      break;
  }
  return Fail(events, result.status);
}

// Keeps freed activation buffers in the heap for the next step. glibc otherwise serves each
// buffer above its (dynamic) mmap threshold with a fresh mmap, and the kernel zero-fills its pages
// on every step; a training loop allocates the same few sizes again and again. Measured with the
// same values given through glibc's MALLOC_*_ variables (preset xs, 2 cores, four interleaved
// 80-step runs each): median 20,371 -> 21,633 tokens/s (+6%).
void KeepFreedMemoryForReuse() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's largest allowed value on 64-bit
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_TOP_PAD, 64 << 20);
}

// Ends a command that leaves nothing to tear down: stdout and stderr flushed, then exit without
// the static destructors (LibTorch's operator deregistration alone is a tenth of the CPU time of
// a 64 MB `prepare --gpt2`).
[[noreturn]] void ExitWithoutTeardown(int code) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  std::_Exit(code);
}

}  // namespace

int main(int argc, char** argv) {
  KeepFreedMemoryForReuse();
  CLI::App app{"spheret-lm: train nanoGPT-style models with every deep connection"};
  app.require_subcommand(1);
  spheret::lm::PrepareCommand prepare;
  spheret::lm::AddPrepareCommand(app, &prepare);
  spheret::lm::CheckDataCommand check_data;
  spheret::lm::AddCheckDataCommand(app, &check_data);
  TrainArgs train;
  CLI::App* train_cmd = app.add_subcommand("train", "train a model; events on stdout");
  train_cmd->add_option("--config", train.config_path, "JSON config file")
      ->check(CLI::ExistingFile);
  train_cmd->add_option("--out", train.out, "run folder (config.json)")->required();
  train_cmd->add_option("--set", train.sets, "override a config key: key=value (repeatable)");
  train_cmd->add_option("--data-root", train.data_root, "folder of named datasets (default data/)");
  train_cmd->add_flag("--resume", train.resume,
                      "continue from the run folder's checkpoint, if any");
  train_cmd->add_flag("--replay-events", train.replay_events,
                      "with --resume: first print the run's events up to the checkpoint again "
                      "(from OUT/events.jsonl)");
  BenchArgs bench;
  CLI::App* bench_cmd = app.add_subcommand(
      "bench", "step time of each method side by side in one process (a table on stdout)");
  bench_cmd->add_option("--config", bench.train.config_path, "JSON config file")
      ->check(CLI::ExistingFile);
  bench_cmd->add_option("--set", bench.train.sets, "override a config key: key=value (repeatable)");
  bench_cmd->add_option("--data-root", bench.train.data_root, "folder of named datasets");
  bench_cmd
      ->add_option("--methods", bench.methods,
                   "methods to compare, the first the baseline; an entry may add its own keys: "
                   "pre_ln+loops=2+per_loop_loss=true")
      ->delimiter(',');
  bench_cmd->add_option("--steps", bench.steps, "timed steps per method")
      ->check(CLI::PositiveNumber);
  bench_cmd->add_option("--warmup", bench.warmup, "untimed steps first")
      ->check(CLI::NonNegativeNumber);
  spheret::train::SampleOptions sample;
  CLI::App* sample_cmd =
      app.add_subcommand("sample", "print text generated from a run's checkpoint");
  sample_cmd->add_option("--run", sample.run_dir, "training run folder (config.json, ckpt.pt)")
      ->required()
      ->check(CLI::ExistingDirectory);
  sample_cmd->add_option("--prompt", sample.prompt, "start text");
  sample_cmd->add_option("--tokens", sample.tokens, "tokens to generate")
      ->check(CLI::PositiveNumber);
  sample_cmd->add_option("--temperature", sample.temperature, "sampling temperature (> 0)")
      ->check(CLI::PositiveNumber);
  sample_cmd->add_option("--top-k", sample.top_k, "keep the k most likely tokens (0: all)")
      ->check(CLI::NonNegativeNumber);
  sample_cmd->add_option("--seed", sample.seed, "random seed");
  spheret::lm::ZeroShotCommands zero_shot;
  spheret::lm::AddZeroShotCommands(app, &zero_shot);
  spheret::lm::ExportCommands exporter;
  spheret::lm::AddExportCommands(app, &exporter);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kExitUsage;  // --help is a success; anything else a usage error.
  }

  EventWriter events(&std::cout);
  try {
    // prepare's files are closed, synced and renamed, or removed, when RunPrepare returns.
    if (*prepare.command) ExitWithoutTeardown(spheret::lm::RunPrepare(prepare, events));
    if (*check_data.command) return spheret::lm::RunCheckData(check_data, events);
    if (*bench_cmd) return RunBench(bench, events);
    if (const int code = spheret::lm::RunExportCommand(exporter, events); code >= 0) return code;
    if (*zero_shot.eval) {  // it stops between passes (a worker's hand-back)
      std::signal(SIGTERM, OnStopSignal);
      std::signal(SIGINT, OnStopSignal);
    }
    if (const int code = spheret::lm::RunZeroShotCommand(zero_shot, &g_stop, events); code >= 0) {
      return code;
    }
    if (*sample_cmd) {
      std::string text;
      if (absl::Status error = spheret::train::Sample(sample, &text); !error.ok()) {
        return Fail(events, error);
      }
      std::cout << text << std::endl;
      return 0;
    }
    return RunTrain(train, events);
  } catch (const std::exception& e) {  // LibTorch and the standard library, at the boundary.
    return Fail(events, spheret::train::ExceptionMessage(e));
  } catch (...) {
    return Fail(events, "unknown exception");
  }
}
