#include "bench/load_samples.h"

#include <algorithm>

namespace spheret::bench {

std::string SweepYaml(const std::string& name, int trials) {
  std::string seeds;
  const int per_seed = 100;
  for (int s = 0; s < std::max(trials / per_seed, 1); ++s)
    seeds += (s ? ", " : "") + std::to_string(s);
  std::string lrs, warmups;
  for (int i = 1; i <= 10; ++i) {
    lrs += (i > 1 ? ", " : "") + std::to_string(i) + "e-4";
    warmups += (i > 1 ? ", " : "") + std::to_string(10 * i);
  }
  return "name: " + name +
         "\ndataset: fortunes\nbase: {scale: xs, max_iters: 1000}\n"
         "parameters:\n  learning_rate: {values: [" +
         lrs + "]}\n  warmup_iters: {values: [" + warmups + "]}\nseeds: [" + seeds + "]\n";
}

std::vector<double> Sorted(const std::vector<std::vector<double>>& parts) {
  std::vector<double> all;
  for (const auto& part : parts) all.insert(all.end(), part.begin(), part.end());
  std::sort(all.begin(), all.end());
  return all;
}

double Percentile(const std::vector<double>& sorted, double q) {
  return sorted.empty() ? 0 : sorted[static_cast<size_t>(q * (sorted.size() - 1))] * 1e3;
}

}  // namespace spheret::bench
