// Asynchronous successive halving (ASHA, Li et al., MLSys 2020) in its stopping form, as Optuna's
// SuccessiveHalvingPruner (min_early_stopping_rate 0, bootstrap_count 0) and Ray Tune's
// ASHAScheduler apply it: rung k sits at step min_iters * eta^k (below the trial's own max_iters,
// its top rung). When a trial reports the search metric at a step that reaches its next rung, the
// value is recorded at that rung and the trial continues only when it is among the best
// 1/eta of every value recorded there so far, its own included (while fewer than eta values are
// there: only when it is the best); otherwise it stops. A report that reaches several rungs at once
// is judged at each in turn. A NaN stops the trial without being recorded. Ties continue. Pure: no
// clock, no I/O.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace spheret::sched {

struct RungRule {
  int64_t min_iters = 1;     // the first rung's step
  int reduction_factor = 3;  // eta (>= 2)
  bool minimize = true;
  int64_t max_iters = 0;  // the top rung: no rung at or beyond it (0: no top)
  // The step of rung `rung`: min_iters * eta^rung (INT64_MAX when it overflows).
  int64_t RungStep(int rung) const;
  // How many rungs lie below max_iters (INT32_MAX when max_iters is 0).
  int Rungs() const;
};

// What one report did to a trial.
struct RungVerdict {
  bool stop = false;  // stop the trial now
  int rung = 0;       // rungs the trial has completed after the report (its next rung's index)
  std::vector<std::pair<int, double>> recorded;  // (rung, value) this report recorded
};

// The values recorded at each rung of one search (one group of a sweep).
class RungBoard {
 public:
  // A trial that has completed `rung` rungs reports `value` at `step`.
  RungVerdict Report(const RungRule& rule, int rung, int64_t step, double value);
  // Records a value judged before (a restart reloading the store).
  void Add(int rung, double value);
  // The values recorded at `rung`, ascending.
  const std::vector<double>& Values(int rung) const;

 private:
  std::map<int, std::vector<double>> values_;
};

}  // namespace spheret::sched
