// `spheret-lm eval` and `spheret-lm score`: zero-shot scores of a run's checkpoint on the tasks of
// tasks.h, and answers to raw lm-evaluation-harness requests. Both score through one Scorer, so
// the same requests get the same answers from either.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "worker/eval/metrics.h"
#include "worker/eval/scorer.h"

namespace spheret::eval {

struct EvalOptions {
  ScorerOptions scorer;            // run_dir, data_root, device, batch_tokens, progress
  std::vector<std::string> tasks;  // names (comma lists allowed)
  std::string data_dir;            // one sub-folder per task (tasks.h: TaskFile); with
                                   // scorer.data_root, a folder under it or a name there
  int64_t expect_step = -1;        // --step: the checkpoint must be this step's; -1 = any
  std::string dump_requests;       // a JSONL file of every request with its answer; "" = none
  int64_t bootstrap_iters = 100000;
};

struct TaskResult {
  std::string task;
  std::vector<MetricValue> metrics;
};

// Loads every task's documents first (a bad file fails before any scoring), scores all requests
// in one pass, and returns each task's metrics; *step is the checkpoint's step. InvalidArgument
// naming both when data_dir leaves scorer.data_root ("../../etc", "/etc"; ResolveUnderRoot of
// base/path_under_root.h).
absl::Status Evaluate(const EvalOptions& options, int64_t* step, std::vector<TaskResult>* results);

// Reads harness requests, one JSON object per line with "request_type" ("loglikelihood" or
// "loglikelihood_rolling") and "arguments" ([context, continuation] or [text]), and writes each
// object back with "loglikelihood" (and "is_greedy") added. Errors name the file and line.
absl::Status ScoreRequestsFile(const ScorerOptions& options, const std::string& requests_path,
                               std::ostream& out);

}  // namespace spheret::eval
