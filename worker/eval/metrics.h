// A task's metrics and standard errors from the answers to its requests, computed as
// lm-evaluation-harness 0.4.13 computes them: acc and acc_norm (by len() of each choice) with
// argmax's first-wins ties, mean-based standard errors with Bessel's correction, LAMBADA's
// perplexity with the harness's bootstrap (Python's Mersenne Twister, seeds 0..99, chunks of
// 1000), and WikiText's weighted word/byte perplexities and bits per byte (no standard error).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "worker/eval/tasks.h"

namespace spheret::eval {

struct MetricValue {
  std::string metric;
  double value = 0;
  double std_error = 0;  // NaN where the harness reports N/A
};

// answers[d][r]: the answer to request r of document d. bootstrap_iters as the harness's
// --bootstrap_iters (100000 by default; 0 skips the bootstrapped standard errors).
std::vector<MetricValue> ScoreTask(const TaskSpec& task, const std::vector<TaskDoc>& docs,
                                   const std::vector<std::vector<Answer>>& answers,
                                   int64_t bootstrap_iters = 100000);

// Python's random.Random(seed) for integer seeds: genrand_res53 after init_by_array.
class PythonRandom {
 public:
  explicit PythonRandom(uint32_t seed);
  double Random();  // random.random()
 private:
  uint32_t Next();
  uint32_t state_[624];
  int index_ = 624;
};

// sample_stddev(values) / sqrt(n), and the harness's bootstrap of exp(-mean(values)).
double MeanStdError(const std::vector<double>& values);
double BootstrapPerplexityStdError(const std::vector<double>& loglikelihoods, int64_t iters);

}  // namespace spheret::eval
