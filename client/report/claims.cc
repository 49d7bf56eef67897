// Evaluating the claims: the figures of each pair of rows (claims.h; the rows: claims_rows.h).
#include "client/report/claims.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "absl/strings/str_cat.h"
#include "client/report/claims_rows.h"
#include "client/report/fisher.h"
#include "protocol/metric_catalog.h"

namespace spheret::client {
namespace {

using claim_rows::Row;
using claim_rows::Rows;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A trial's value of a final metric, NaN when it has none.
double FinalValue(const ClaimTrial& trial, const std::string& metric) {
  auto found = trial.result.values.find(metric);
  return found == trial.result.values.end() ? kNaN : found->second;
}

double MinimumOf(const std::vector<double>& values) {
  double low = kNaN;
  for (double v : values) {
    if (std::isfinite(v) && !(v >= low)) low = v;
  }
  return low;
}

// The first step of the curve at or below `loss` (NaN when none).
double StepToReach(const ClaimTrial& trial, double loss) {
  for (size_t k = 0; k < trial.val_steps.size() && k < trial.val_losses.size(); ++k) {
    if (std::isfinite(trial.val_losses[k]) && trial.val_losses[k] <= loss) {
      return static_cast<double>(trial.val_steps[k]);
    }
  }
  return kNaN;
}

// The trial's value of the claim's metric (NaN: not counted, and why in `why`).
double ValueOf(const ClaimMetric metric, const ClaimTrial& trial, double threshold,
               std::string* why) {
  const TrialState state = trial.result.state;
  if (metric == ClaimMetric::kDivergences) {
    if (state == TrialState::kDiverged) return 1;
    if (state == TrialState::kSucceeded) return 0;
    *why = TrialStateName(state);
    return kNaN;
  }
  if (state != TrialState::kSucceeded) {
    *why = TrialStateName(state);
    return kNaN;
  }
  double value = kNaN;
  std::string name = protocol::kValLoss;
  if (metric == ClaimMetric::kFinalValLoss) value = FinalValue(trial, protocol::kValLoss);
  if (metric == ClaimMetric::kLossSpikes) {
    name = protocol::kTrainLossSpikes;
    value = FinalValue(trial, name);
  }
  if (metric == ClaimMetric::kStepsToLoss) value = StepToReach(trial, threshold);
  if (!std::isfinite(value)) {
    *why = absl::StrCat(TrialStateName(TrialState::kSucceeded), " without a finite ", name);
  }
  return value;
}

// The loss every SUCCEEDED trial of both rows reaches: the largest of their curves' minima.
double ThresholdOf(const std::vector<ClaimTrial>& trials, const Row& a, const Row& b) {
  double threshold = kNaN;
  for (const Row* row : {&a, &b}) {
    for (size_t i : row->trials) {
      if (trials[i].result.state != TrialState::kSucceeded) continue;
      const double low = MinimumOf(trials[i].val_losses);
      if (std::isfinite(low) && !(low <= threshold)) threshold = low;
    }
  }
  return threshold;
}

// The counted values of a row (with their seeds and trials); the others said in `left_out`.
SeedValues Collect(const Rows& rows, const std::vector<ClaimTrial>& trials, const Row& row,
                   ClaimMetric metric, double threshold, std::vector<int64_t>* ids,
                   std::vector<std::string>* left_out) {
  SeedValues counted;
  for (size_t i : row.trials) {
    std::string why;
    const double value = ValueOf(metric, trials[i], threshold, &why);
    if (std::isnan(value)) {
      left_out->push_back(absl::StrCat(row.label, ": trial ", trials[i].result.trial_id, " ", why));
      continue;
    }
    counted.seeds.push_back(rows.seeds[i]);
    counted.values.push_back(value);
    ids->push_back(trials[i].result.trial_id);
  }
  return counted;
}

double Mean(const std::vector<double>& values) {
  if (values.empty()) return kNaN;
  double sum = 0;
  for (double v : values) sum += v;
  return sum / static_cast<double>(values.size());
}

void CountTest(ClaimComparison* c) {
  for (double v : c->a_values) c->diverged_a += v > 0;
  for (double v : c->b_values) c->diverged_b += v > 0;
  c->fisher_p = FisherExactTwoSided(c->diverged_a, static_cast<int>(c->a_values.size()),
                                    c->diverged_b, static_cast<int>(c->b_values.size()));
  c->test = "Fisher exact";
  c->difference = WelchDifference({}, {});  // no t figures
  c->difference.mean = c->mean_a - c->mean_b;
}

// What the two rows differ in beyond the claim's own keys; `disallowed` those that make the
// comparison inconclusive.
void FindRowConfounds(const Claim& claim, const std::vector<ClaimTrial>& trials, const Row& a,
                      const Row& b, ClaimComparison* c) {
  std::vector<ConfoundTrial> placed;
  for (const Row* row : {&a, &b}) {
    for (size_t i : row->trials)
      placed.push_back({row->label, row->column, &trials[i].result.config.object()});
  }
  std::set<std::string> identity = DefaultIdentityKeys();
  identity.insert(claim.varied.begin(), claim.varied.end());
  c->confounds = FindConfounds(placed, identity);
  for (const Confound& confound : c->confounds) {
    const bool allowed = claim.pairing == Pairing::kPaperSettings && confound.key == "scalenorm";
    if (!allowed) c->disallowed.push_back(confound.key);
  }
}

ClaimComparison Compare(const Claim& claim, const Rows& rows, const std::vector<ClaimTrial>& trials,
                        const Row& a, const Row& b) {
  ClaimComparison c;
  c.claim = &claim;
  c.column = a.column;
  c.a_row = a.label;
  c.b_row = b.label;
  c.threshold = claim.metric == ClaimMetric::kStepsToLoss ? ThresholdOf(trials, a, b) : kNaN;
  const SeedValues va =
      Collect(rows, trials, a, claim.metric, c.threshold, &c.a_trials, &c.left_out);
  const SeedValues vb =
      Collect(rows, trials, b, claim.metric, c.threshold, &c.b_trials, &c.left_out);
  c.a_values = va.values;
  c.b_values = vb.values;
  c.mean_a = Mean(va.values);
  c.mean_b = Mean(vb.values);
  if (claim.metric == ClaimMetric::kDivergences) {
    CountTest(&c);
  } else {
    c.difference = CompareOverSeeds(va, vb);
    c.test = std::isnan(c.difference.mean) ? "needs 2 seeds each"
             : c.difference.paired         ? "paired t"
                                           : "Welch t";
  }
  FindRowConfounds(claim, trials, a, b, &c);
  Decide(&c);
  return c;
}

// The A row of lowest mean final val loss among `candidates` (nullptr when none has one).
const Row* BestRow(const std::vector<const Row*>& candidates,
                   const std::vector<ClaimTrial>& trials) {
  const Row* best = nullptr;
  double best_mean = kNaN;
  for (const Row* row : candidates) {
    std::vector<double> values;
    for (size_t i : row->trials) {
      const double v = trials[i].result.state == TrialState::kSucceeded
                           ? FinalValue(trials[i], protocol::kValLoss)
                           : kNaN;
      if (std::isfinite(v)) values.push_back(v);
    }
    const double mean = Mean(values);
    if (std::isfinite(mean) && !(mean >= best_mean)) {
      best = row;
      best_mean = mean;
    }
  }
  return best;
}

}  // namespace

std::vector<ClaimComparison> EvaluateClaims(const std::vector<ClaimTrial>& trials,
                                            const std::vector<Claim>& claims) {
  const Rows rows = claim_rows::BuildRows(trials);
  std::vector<ClaimComparison> out;
  for (const Claim& claim : claims) {
    std::map<std::string, std::vector<const Row*>> a_rows;  // column -> A rows that pair
    for (const Row& a : rows.rows) {
      if (!claim_rows::Plays(claim.a, a.config)) continue;
      for (const Row& b : rows.rows) {
        if (&a == &b || b.column != a.column || !claim_rows::Plays(claim.b, b.config)) continue;
        if (!claim_rows::Pairs(claim, a, b)) continue;
        a_rows[a.column].push_back(&a);
        break;
      }
    }
    for (const auto& [column, candidates] : a_rows) {
      std::vector<const Row*> chosen = candidates;
      if (claim.best_of_a) {
        const Row* best = BestRow(candidates, trials);
        chosen = best == nullptr ? std::vector<const Row*>{} : std::vector<const Row*>{best};
      }
      for (const Row* a : chosen) {
        for (const Row& b : rows.rows) {
          if (a == &b || b.column != column || !claim_rows::Plays(claim.b, b.config)) continue;
          if (claim_rows::Pairs(claim, *a, b)) out.push_back(Compare(claim, rows, trials, *a, b));
        }
      }
    }
  }
  return out;
}

}  // namespace spheret::client
