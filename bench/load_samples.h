// What bench_coordinator_load submits and how it reads its samples: the sweep file of its load
// and the percentiles of per-thread latency samples. Pure.
#pragma once

#include <string>
#include <vector>

namespace spheret::bench {

// A grid of exactly `trials` trials: learning_rate x warmup_iters x seeds.
std::string SweepYaml(const std::string& name, int trials);

// The per-thread samples (s), merged and sorted.
std::vector<double> Sorted(const std::vector<std::vector<double>>& parts);

// The q-quantile of sorted samples, in ms (0 for none).
double Percentile(const std::vector<double>& sorted, double q);

}  // namespace spheret::bench
