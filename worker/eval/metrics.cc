#include "worker/eval/metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <thread>

namespace spheret::eval {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Python's sum(values) / len(values): a left-to-right sum.
double Mean(const std::vector<double>& values) {
  double sum = 0;
  for (double v : values) sum += v;
  return sum / static_cast<double>(values.size());
}

double SampleStdDev(const std::vector<double>& values) {
  const double mu = Mean(values);
  double sum = 0;
  for (double v : values) sum += (v - mu) * (v - mu);
  return std::sqrt(sum / static_cast<double>(values.size() - 1));
}

// First index of the largest value, as numpy's argmax.
size_t ArgMax(const std::vector<double>& values) {
  return static_cast<size_t>(std::max_element(values.begin(), values.end()) - values.begin());
}

MetricValue MeanMetric(const std::string& name, const std::vector<double>& items) {
  return {name, Mean(items), items.size() > 1 ? MeanStdError(items) : kNaN};
}

std::vector<MetricValue> MultipleChoice(const TaskSpec& task, const std::vector<TaskDoc>& docs,
                                        const std::vector<std::vector<Answer>>& answers) {
  std::vector<double> acc, acc_norm;
  for (size_t d = 0; d < docs.size(); ++d) {
    std::vector<double> lls, normed;
    for (size_t c = 0; c < answers[d].size(); ++c) {
      lls.push_back(answers[d][c].loglikelihood);
      normed.push_back(answers[d][c].loglikelihood / docs[d].choice_lengths[c]);
    }
    const auto gold = docs[d].gold;
    acc.push_back(static_cast<int64_t>(ArgMax(lls)) == gold ? 1.0 : 0.0);
    acc_norm.push_back(static_cast<int64_t>(ArgMax(normed)) == gold ? 1.0 : 0.0);
  }
  std::vector<MetricValue> out;
  for (const std::string& metric : task.metrics) {
    out.push_back(MeanMetric(metric, metric == "acc" ? acc : acc_norm));
  }
  return out;
}

std::vector<MetricValue> Loglikelihood(const TaskSpec& task,
                                       const std::vector<std::vector<Answer>>& answers,
                                       int64_t bootstrap_iters) {
  std::vector<double> lls, greedy;
  for (const std::vector<Answer>& doc : answers) {
    lls.push_back(doc[0].loglikelihood);
    greedy.push_back(doc[0].is_greedy ? 1.0 : 0.0);
  }
  std::vector<MetricValue> out;
  for (const std::string& metric : task.metrics) {
    if (metric == "acc") {
      out.push_back(MeanMetric(metric, greedy));
    } else {  // perplexity
      const bool bootstrap = bootstrap_iters > 0 && lls.size() > 1;
      out.push_back({metric, std::exp(-Mean(lls)),
                     bootstrap ? BootstrapPerplexityStdError(lls, bootstrap_iters) : kNaN});
    }
  }
  return out;
}

std::vector<MetricValue> Rolling(const TaskSpec& task, const std::vector<TaskDoc>& docs,
                                 const std::vector<std::vector<Answer>>& answers) {
  double ll = 0;
  int64_t words = 0, bytes = 0;  // the harness sums the counts as Python ints
  for (size_t d = 0; d < docs.size(); ++d) {
    ll += answers[d][0].loglikelihood;
    words += docs[d].words;
    bytes += docs[d].bytes;
  }
  std::vector<MetricValue> out;
  for (const std::string& metric : task.metrics) {
    const double per = ll / static_cast<double>(metric == "word_perplexity" ? words : bytes);
    const double value = metric == "bits_per_byte" ? -per / std::log(2.0) : std::exp(-per);
    out.push_back({metric, value, kNaN});
  }
  return out;
}

}  // namespace

PythonRandom::PythonRandom(uint32_t seed) {
  // init_genrand(19650218) then init_by_array({seed}), as CPython's random_seed for an int.
  state_[0] = 19650218u;
  for (int i = 1; i < 624; ++i) {
    state_[i] = 1812433253u * (state_[i - 1] ^ (state_[i - 1] >> 30)) + static_cast<uint32_t>(i);
  }
  int i = 1;
  for (int k = 624; k > 0; --k) {
    state_[i] = (state_[i] ^ ((state_[i - 1] ^ (state_[i - 1] >> 30)) * 1664525u)) + seed;
    if (++i >= 624) {
      state_[0] = state_[623];
      i = 1;
    }
  }
  for (int k = 623; k > 0; --k) {
    state_[i] = (state_[i] ^ ((state_[i - 1] ^ (state_[i - 1] >> 30)) * 1566083941u)) -
                static_cast<uint32_t>(i);
    if (++i >= 624) {
      state_[0] = state_[623];
      i = 1;
    }
  }
  state_[0] = 0x80000000u;
}

uint32_t PythonRandom::Next() {
  if (index_ >= 624) {
    for (int k = 0; k < 624; ++k) {
      const uint32_t y = (state_[k] & 0x80000000u) | (state_[(k + 1) % 624] & 0x7fffffffu);
      state_[k] = state_[(k + 397) % 624] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
    }
    index_ = 0;
  }
  uint32_t y = state_[index_++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= y >> 18;
  return y;
}

double PythonRandom::Random() {
  const uint32_t a = Next() >> 5, b = Next() >> 6;
  return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0);
}

double MeanStdError(const std::vector<double>& values) {
  return SampleStdDev(values) / std::sqrt(static_cast<double>(values.size()));
}

double BootstrapPerplexityStdError(const std::vector<double>& loglikelihoods, int64_t iters) {
  const int64_t chunk = std::min<int64_t>(1000, iters), chunks = iters / chunk;
  std::vector<double> resampled(static_cast<size_t>(chunk * chunks));
  const double n = static_cast<double>(loglikelihoods.size());
  auto run_chunk = [&](int64_t c) {  // _bootstrap_internal: Random(c), chunk x rnd.choices(xs)
    PythonRandom random(static_cast<uint32_t>(c));
    std::vector<double> sample(loglikelihoods.size());
    for (int64_t k = 0; k < chunk; ++k) {
      for (double& x : sample) x = loglikelihoods[static_cast<size_t>(random.Random() * n)];
      resampled[static_cast<size_t>(c * chunk + k)] = std::exp(-Mean(sample));
    }
  };
  const int64_t threads =
      std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, std::max<int64_t>(chunks, 1));
  std::vector<std::thread> pool;
  for (int64_t t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int64_t c = t; c < chunks; c += threads) run_chunk(c);
    });
  }
  for (std::thread& thread : pool) thread.join();
  return SampleStdDev(resampled);
}

std::vector<MetricValue> ScoreTask(const TaskSpec& task, const std::vector<TaskDoc>& docs,
                                   const std::vector<std::vector<Answer>>& answers,
                                   int64_t bootstrap_iters) {
  switch (task.output) {
    case OutputType::kMultipleChoice:
      return MultipleChoice(task, docs, answers);
    case OutputType::kLoglikelihood:
      return Loglikelihood(task, answers, bootstrap_iters);
    case OutputType::kLoglikelihoodRolling:
      return Rolling(task, docs, answers);
  }
  return {};
}

}  // namespace spheret::eval
