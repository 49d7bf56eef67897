#include "server/sched/rungs.h"

#include <algorithm>
#include <climits>
#include <cmath>

namespace spheret::sched {

int64_t RungRule::RungStep(int rung) const {
  int64_t step = min_iters;
  for (int i = 0; i < rung; ++i) {
    if (step > INT64_MAX / reduction_factor) return INT64_MAX;
    step *= reduction_factor;
  }
  return step;
}

int RungRule::Rungs() const {
  if (max_iters <= 0) return INT_MAX;
  int rungs = 0;
  while (RungStep(rungs) < max_iters) ++rungs;
  return rungs;
}

void RungBoard::Add(int rung, double value) {
  std::vector<double>& values = values_[rung];
  values.insert(std::upper_bound(values.begin(), values.end(), value), value);
}

const std::vector<double>& RungBoard::Values(int rung) const {
  static const std::vector<double> kNone;
  auto found = values_.find(rung);
  return found == values_.end() ? kNone : found->second;
}

RungVerdict RungBoard::Report(const RungRule& rule, int rung, int64_t step, double value) {
  RungVerdict verdict;
  verdict.rung = rung;
  const int top = rule.Rungs();
  while (verdict.rung < top && step >= rule.RungStep(verdict.rung)) {
    if (std::isnan(value)) {
      verdict.stop = true;
      return verdict;
    }
    Add(verdict.rung, value);
    verdict.recorded.emplace_back(verdict.rung, value);
    const std::vector<double>& values = values_[verdict.rung];
    // The best 1/eta of the values there (its own included), at least the best one.
    const size_t kept = std::max<size_t>(values.size() / rule.reduction_factor, 1);
    const bool promoted =
        rule.minimize ? value <= values[kept - 1] : value >= values[values.size() - kept];
    ++verdict.rung;
    if (!promoted) {
      verdict.stop = true;
      return verdict;
    }
  }
  return verdict;
}

}  // namespace spheret::sched
