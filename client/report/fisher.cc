#include "client/report/fisher.h"

#include <algorithm>
#include <cmath>

namespace spheret::client {
namespace {

// log of n choose k.
double LogChoose(int n, int k) {
  return std::lgamma(n + 1.0) - std::lgamma(k + 1.0) - std::lgamma(n - k + 1.0);
}

// P(X = k) of the hypergeometric law: k events in the first group of `a_total` when `events` of
// the `total` trials had one.
double Hypergeometric(int k, int a_total, int events, int total) {
  return std::exp(LogChoose(events, k) + LogChoose(total - events, a_total - k) -
                  LogChoose(total, a_total));
}

}  // namespace

double FisherExactTwoSided(int a_events, int a_total, int b_events, int b_total) {
  const int total = a_total + b_total;
  const int events = a_events + b_events;
  if (a_total == 0 || b_total == 0 || events == 0 || events == total) return 1.0;
  const int low = std::max(0, events - b_total);
  const int high = std::min(events, a_total);
  const double observed = Hypergeometric(a_events, a_total, events, total);
  // A table as probable as the observed one counts as extreme; the relative margin (SciPy's is
  // 1e-14) keeps lgamma's rounding from dropping a table of equal probability.
  const double bound = observed * (1 + 1e-7);
  double p = 0;
  for (int k = low; k <= high; ++k) {
    const double probability = Hypergeometric(k, a_total, events, total);
    if (probability <= bound) p += probability;
  }
  return std::min(1.0, p);
}

}  // namespace spheret::client
