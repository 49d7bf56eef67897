// Statistics over seeds: what a reviewer needs to ask "is this difference real?". The t
// distribution is Boost.Math's (students_t); the figures match scipy.stats (tests/client/stats).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace spheret::client {

// The confidence of every interval spheret prints.
inline constexpr double kConfidence = 0.95;

// The mean of `values` without overflow: the plain sum / n while that sum is finite (ordinary
// values get the usual figure, bit for bit), else m x (sum of x / m) / n with m = max |x|, which
// is finite whenever every value is (a mean lies between the values' min and max: the mean of
// 1e308 and 1.5e308 is 1.25e308, not inf). NaN when empty; inf or NaN only when a value is.
double FiniteMean(const std::vector<double>& values);

// n, mean, sample standard deviation (n - 1) and the 95% Student t interval of the mean:
// mean ± t(0.975, n - 1) · std / √n. std and the interval are NaN when n < 2; all NaN when n = 0.
// The mean is FiniteMean's, and std is scaled the same way, so finite values near DBL_MAX give a
// finite mean (std and the interval overflow only where their true value does).
struct Description {
  int n = 0;
  double mean = 0;
  double std = 0;
  double ci_low = 0;
  double ci_high = 0;
};
Description Describe(const std::vector<double>& values);

// A difference of means a − b with its 95% interval and the two-sided p-value of its t test:
// paired (scipy.stats.ttest_rel: the one-sample test of the differences, df = n − 1) or Welch's
// (ttest_ind with equal_var=False: Welch–Satterthwaite df).
struct Difference {
  bool paired = false;
  int n_a = 0;
  int n_b = 0;
  double mean = 0;  // mean of a − b (paired), mean(a) − mean(b) (Welch)
  double ci_low = 0;
  double ci_high = 0;
  double t = 0;
  double df = 0;
  double p = 0;
  // True when the interval includes 0 (also when it is NaN): no evidence of a difference.
  bool IncludesZero() const;
};
// Needs a.size() == b.size() >= 2 (pairs in order); else every figure is NaN.
Difference PairedDifference(const std::vector<double>& a, const std::vector<double>& b);
// Needs both sizes >= 2; else every figure is NaN.
Difference WelchDifference(const std::vector<double>& a, const std::vector<double>& b);

// Seeds and values of one cell; PairedDifference when both hold the same seeds (each once, at
// least 2), WelchDifference otherwise.
struct SeedValues {
  std::vector<int64_t> seeds;
  std::vector<double> values;
};
Difference CompareOverSeeds(const SeedValues& a, const SeedValues& b);

}  // namespace spheret::client
