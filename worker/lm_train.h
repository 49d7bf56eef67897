// spheret-lm's training commands: `train` (a model trained into a run folder, events on stdout,
// checkpointed on SIGTERM/SIGINT; with WORLD_SIZE > 1 one rank of a data-parallel gang) and
// `bench` (the step time of each method side by side in one process, a table on stdout).
//
// The config enters here once: the --config file is read into a TrainConfig
// (train::ApplyConfigFile), and the --set overrides and each bench entry's keys are applied to
// copies of that typed value.
#pragma once

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "worker/train/events.h"

namespace spheret::lm {

struct TrainArgs {
  std::string config_path;
  std::string out;
  std::vector<std::string> sets;
  std::string data_root;
  bool resume = false;
  bool replay_events = false;
};

struct BenchArgs {
  TrainArgs train;                   // config_path, sets, data_root
  std::vector<std::string> methods;  // every built-in method unless --methods names some
  int64_t steps = 40, warmup = 10;
};

struct TrainCommands {
  CLI::App* train_command = nullptr;
  CLI::App* bench_command = nullptr;
  TrainArgs train;
  BenchArgs bench;
};

// Adds `train` and `bench` to `app`; `commands` must outlive parsing.
void AddTrainCommands(CLI::App& app, TrainCommands* commands);

// Runs the one that was given; -1 when neither was. `train` installs `on_stop_signal` for SIGTERM
// and SIGINT once its process group has formed; the handler raises `stop`, and the run stops at
// a step boundary, checkpointed (exit kExitStopped).
int RunTrainCommand(const TrainCommands& commands, std::atomic<bool>* stop,
                    void (*on_stop_signal)(int), train::EventWriter& events);

}  // namespace spheret::lm
