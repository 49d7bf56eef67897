// spheret-lm's zero-shot commands: `eval` (a run's checkpoint on the tasks of worker/eval/tasks.h,
// eval events on stdout) and `score` (raw lm-evaluation-harness requests answered as JSONL), and
// the evaluation a training run asks for with eval_tasks.
#pragma once

#include <CLI/CLI.hpp>
#include <atomic>
#include <ostream>
#include <string>

#include "config/train_config.h"
#include "worker/eval/evaluate.h"
#include "worker/train/events.h"

namespace spheret::lm {

struct ZeroShotCommands {
  CLI::App* eval = nullptr;
  CLI::App* score = nullptr;
  eval::EvalOptions eval_options;
  eval::ScorerOptions score_options;
  std::string requests, out;
};

// Adds `eval` and `score` to `app`; `commands` must outlive parsing.
void AddZeroShotCommands(CLI::App& app, ZeroShotCommands* commands);
// Runs the one that was given; -1 when neither was. When `stop` is raised (SIGTERM/SIGINT) an
// `eval` stops between passes and exits kExitStopped, having printed no score (a worker hands
// its job back, and the next attempt scores from the start).
int RunZeroShotCommand(ZeroShotCommands& commands, const std::atomic<bool>* stop,
                       train::EventWriter& events);

// The evaluation of a training run (config.eval_tasks non-empty) at the checkpoint of `step`:
// eval events on `events`, a table on `log`. A failure is an eval event with metric "error" and
// the message; it never fails the run. When `stop` is raised (SIGTERM/SIGINT) the scoring stops
// between passes and this returns false: the run should exit as stopped, so that its resume (at
// the same checkpoint) evaluates again.
bool EvaluateTrainedRun(const TrainConfig& config, const std::string& run_dir, int64_t step,
                        const std::atomic<bool>* stop, train::EventWriter& events,
                        std::ostream& log);

}  // namespace spheret::lm
