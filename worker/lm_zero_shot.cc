#include "worker/lm_zero_shot.h"

#include <cmath>
#include <fstream>
#include <iostream>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "worker/lm_fail.h"

namespace spheret::lm {
namespace {

void PrintTable(const std::vector<eval::TaskResult>& results, int64_t step, std::ostream& log) {
  log << absl::StrFormat("%-16s %-16s %12s %10s   (step %d)\n", "task", "metric", "value", "stderr",
                         step);
  for (const eval::TaskResult& result : results) {
    for (const eval::MetricValue& metric : result.metrics) {
      log << absl::StrFormat("%-16s %-16s %12.6f %10s\n", result.task, metric.metric, metric.value,
                             std::isnan(metric.std_error)
                                 ? std::string("N/A")
                                 : absl::StrFormat("%.6f", metric.std_error));
    }
  }
  log.flush();
}

void EmitResults(const std::vector<eval::TaskResult>& results, int64_t step,
                 train::EventWriter& events) {
  for (const eval::TaskResult& result : results) {
    for (const eval::MetricValue& metric : result.metrics) {
      events.Emit(protocol::EvalEvent{step, result.task, metric.metric, metric.value,
                                      metric.std_error, ""});
    }
  }
}

}  // namespace

void AddZeroShotCommands(CLI::App& app, ZeroShotCommands* c) {
  eval::EvalOptions& e = c->eval_options;
  c->eval = app.add_subcommand(
      "eval", "zero-shot scores of a run's checkpoint, as lm-evaluation-harness computes them");
  c->eval->add_option("--run", e.scorer.run_dir, "training run folder (config.json, ckpt.pt)")
      ->required()
      ->check(CLI::ExistingDirectory);
  c->eval
      ->add_option("--tasks", e.tasks,
                   "tasks, comma-separated: " + absl::StrJoin(ZeroShotTaskNames(), ","))
      ->required()
      ->delimiter(',');
  c->eval
      ->add_option("--data", e.data_dir,
                   "folder with one sub-folder of JSONL per task (under --data-root when given)")
      ->required();
  c->eval->add_option("--step", e.expect_step, "refuse a checkpoint of another step");
  c->eval->add_option("--dump-requests", e.dump_requests,
                      "write every request with its answer to this JSONL file");
  c->eval
      ->add_option("--bootstrap-iters", e.bootstrap_iters,
                   "bootstrap resamples for perplexity standard errors (harness: 100000)")
      ->check(CLI::NonNegativeNumber);
  c->score = app.add_subcommand("score", "answer lm-evaluation-harness requests (JSONL)");
  eval::ScorerOptions& s = c->score_options;
  c->score->add_option("--run", s.run_dir, "training run folder (config.json, ckpt.pt)")
      ->required()
      ->check(CLI::ExistingDirectory);
  c->score->add_option("--requests", c->requests, "JSONL: request_type and arguments per line")
      ->required()
      ->check(CLI::ExistingFile);
  c->score->add_option("--out", c->out, "answers JSONL (default stdout)");
  for (auto [command, options] : {std::pair{c->eval, &e.scorer}, std::pair{c->score, &s}}) {
    command->add_option("--data-root", options->data_root,
                        "folder of named data sets, for the run's tokenizer");
    command->add_option("--device", options->device, "cpu, cuda or cuda:N (bf16 autocast)");
    command->add_option("--batch-tokens", options->batch_tokens, "tokens per forward pass")
        ->check(CLI::PositiveNumber);
  }
}

int RunZeroShotCommand(ZeroShotCommands& c, const std::atomic<bool>* stop,
                       train::EventWriter& events) {
  if (*c.eval) {
    c.eval_options.scorer.progress = &std::cerr;
    c.eval_options.scorer.stop = stop;
    int64_t step = 0;
    std::vector<eval::TaskResult> results;
    const absl::Status error = eval::Evaluate(c.eval_options, &step, &results);
    if (absl::IsCancelled(error)) {
      std::cerr << "spheret-lm: eval stopped by a signal; no score was printed" << std::endl;
      return protocol::kExitStopped;
    }
    if (!error.ok()) return Fail(events, error);
    EmitResults(results, step, events);
    PrintTable(results, step, std::cerr);
    return protocol::kExitOk;
  }
  if (*c.score) {
    c.score_options.progress = &std::cerr;
    std::ofstream file;
    if (!c.out.empty()) {
      file.open(c.out);
      if (!file) return Fail(events, absl::InvalidArgumentError("--out: cannot write " + c.out));
    }
    absl::Status error =
        eval::ScoreRequestsFile(c.score_options, c.requests, c.out.empty() ? std::cout : file);
    return error.ok() ? protocol::kExitOk : Fail(events, error);
  }
  return -1;
}

bool EvaluateTrainedRun(const TrainConfig& config, const std::string& run_dir, int64_t step,
                        const std::atomic<bool>* stop, train::EventWriter& events,
                        std::ostream& log) {
  eval::EvalOptions options;
  options.scorer.run_dir = run_dir;
  options.scorer.data_root = config.data_root;
  options.scorer.device = config.device;
  options.scorer.progress = &log;
  options.scorer.stop = stop;
  options.tasks = {config.eval_tasks};
  absl::StatusOr<std::string> data_dir = ResolveEvalDataDir(config);
  options.data_dir = data_dir.value_or("");
  options.expect_step = step;
  int64_t evaluated = 0;
  std::vector<eval::TaskResult> results;
  absl::Status error = data_dir.status();
  try {
    if (error.ok()) error = eval::Evaluate(options, &evaluated, &results);
  } catch (const std::exception& e) {  // LibTorch's, at the boundary
    error = absl::InternalError(e.what());
  }
  if (absl::IsCancelled(error)) {
    log << "spheret-lm: zero-shot eval of step " << step << " stopped by a signal" << std::endl;
    return false;
  }
  if (!error.ok()) {
    log << "spheret-lm: zero-shot eval of step " << step
        << " failed (training is kept): " << error.message() << std::endl;
    events.Emit(protocol::EvalEvent{step, "*", protocol::kEvalErrorMetric, NAN, NAN,
                                    std::string(error.message())});
    return true;
  }
  EmitResults(results, evaluated, events);
  PrintTable(results, evaluated, log);
  return true;
}

}  // namespace spheret::lm
