#include "client/report/stats.h"

#include <algorithm>
#include <boost/math/distributions/students_t.hpp>
#include <cmath>
#include <limits>
#include <map>

namespace spheret::client {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Boost.Math reports a bad argument as NaN instead of throwing.
using Policy = boost::math::policies::policy<
    boost::math::policies::domain_error<boost::math::policies::ignore_error>,
    boost::math::policies::overflow_error<boost::math::policies::ignore_error>>;
using StudentsT = boost::math::students_t_distribution<double, Policy>;

double Mean(const std::vector<double>& values) { return FiniteMean(values); }

// The largest |x|, or NaN when some x is not finite (no scaling applies then).
double Scale(const std::vector<double>& values) {
  double scale = 0;
  for (double v : values) {
    if (!std::isfinite(v)) return kNaN;
    scale = std::max(scale, std::fabs(v));
  }
  return scale;
}

// Sample variance (n − 1).
double Variance(const std::vector<double>& values, double mean) {
  double squares = 0;
  for (double v : values) squares += (v - mean) * (v - mean);
  return squares / static_cast<double>(values.size() - 1);
}

// Sample standard deviation; scaled by the largest |x| where the squares overflow.
double StandardDeviation(const std::vector<double>& values, double mean) {
  const double plain = std::sqrt(Variance(values, mean));
  const double scale = Scale(values);
  if (std::isfinite(plain) || !(scale > 0) || !std::isfinite(mean)) return plain;
  double squares = 0;
  for (double v : values) squares += (v / scale - mean / scale) * (v / scale - mean / scale);
  return scale * std::sqrt(squares / static_cast<double>(values.size() - 1));
}

// The t quantile that leaves (1 − kConfidence) / 2 above it.
double Critical(double df) {
  if (!(df > 0)) return kNaN;
  return boost::math::quantile(StudentsT(df), 0.5 + kConfidence / 2);
}

// Two-sided p-value of t with df degrees of freedom.
double TwoSidedP(double t, double df) {
  if (std::isnan(t) || !(df > 0)) return kNaN;
  if (std::isinf(t)) return 0;
  return 2 * boost::math::cdf(boost::math::complement(StudentsT(df), std::fabs(t)));
}

Difference Nothing(bool paired, const std::vector<double>& a, const std::vector<double>& b) {
  Difference d;
  d.paired = paired;
  d.n_a = static_cast<int>(a.size());
  d.n_b = static_cast<int>(b.size());
  d.mean = d.ci_low = d.ci_high = d.t = d.df = d.p = kNaN;
  return d;
}

// Fills the interval, t and p of a difference `mean` with standard error `se` and `df`.
void Finish(double se, Difference* d) {
  const double half = Critical(d->df) * se;
  d->ci_low = d->mean - half;
  d->ci_high = d->mean + half;
  d->t = d->mean / se;
  d->p = TwoSidedP(d->t, d->df);
}

}  // namespace

double FiniteMean(const std::vector<double>& values) {
  double sum = 0;
  for (double v : values) sum += v;
  const auto n = static_cast<double>(values.size());
  const double scale = Scale(values);
  if (std::isfinite(sum) || !(scale > 0)) return sum / n;
  double scaled = 0;
  for (double v : values) scaled += v / scale;
  return scale * (scaled / n);
}

Description Describe(const std::vector<double>& values) {
  Description d;
  d.n = static_cast<int>(values.size());
  if (values.empty()) {
    d.mean = d.std = d.ci_low = d.ci_high = kNaN;
    return d;
  }
  d.mean = Mean(values);
  if (d.n < 2) {
    d.std = d.ci_low = d.ci_high = kNaN;
    return d;
  }
  d.std = StandardDeviation(values, d.mean);
  const double half = Critical(d.n - 1) * d.std / std::sqrt(static_cast<double>(d.n));
  d.ci_low = d.mean - half;
  d.ci_high = d.mean + half;
  return d;
}

bool Difference::IncludesZero() const { return !(ci_low > 0 || ci_high < 0); }

Difference PairedDifference(const std::vector<double>& a, const std::vector<double>& b) {
  Difference d = Nothing(true, a, b);
  if (a.size() != b.size() || a.size() < 2) return d;
  std::vector<double> diffs(a.size());
  for (size_t i = 0; i < a.size(); ++i) diffs[i] = a[i] - b[i];
  d.mean = Mean(diffs);
  d.df = static_cast<double>(diffs.size() - 1);
  Finish(std::sqrt(Variance(diffs, d.mean) / static_cast<double>(diffs.size())), &d);
  return d;
}

Difference WelchDifference(const std::vector<double>& a, const std::vector<double>& b) {
  Difference d = Nothing(false, a, b);
  if (a.size() < 2 || b.size() < 2) return d;
  const double mean_a = Mean(a);
  const double mean_b = Mean(b);
  const double va = Variance(a, mean_a) / static_cast<double>(a.size());
  const double vb = Variance(b, mean_b) / static_cast<double>(b.size());
  d.mean = mean_a - mean_b;
  // Welch–Satterthwaite.
  d.df =
      (va + vb) * (va + vb) /
      (va * va / static_cast<double>(a.size() - 1) + vb * vb / static_cast<double>(b.size() - 1));
  Finish(std::sqrt(va + vb), &d);
  return d;
}

Difference CompareOverSeeds(const SeedValues& a, const SeedValues& b) {
  std::map<int64_t, double> by_seed_a;
  std::map<int64_t, double> by_seed_b;
  for (size_t i = 0; i < a.seeds.size() && i < a.values.size(); ++i) {
    by_seed_a[a.seeds[i]] = a.values[i];
  }
  for (size_t i = 0; i < b.seeds.size() && i < b.values.size(); ++i) {
    by_seed_b[b.seeds[i]] = b.values[i];
  }
  const bool each_once = by_seed_a.size() == a.values.size() && by_seed_b.size() == b.values.size();
  bool same_seeds = each_once && by_seed_a.size() == by_seed_b.size() && by_seed_a.size() >= 2;
  for (auto ia = by_seed_a.begin(), ib = by_seed_b.begin(); same_seeds && ia != by_seed_a.end();
       ++ia, ++ib) {
    same_seeds = ia->first == ib->first;
  }
  if (!same_seeds) return WelchDifference(a.values, b.values);
  std::vector<double> pa;
  std::vector<double> pb;
  for (const auto& [seed, value] : by_seed_a) {
    pa.push_back(value);
    pb.push_back(by_seed_b.at(seed));
  }
  return PairedDifference(pa, pb);
}

}  // namespace spheret::client
