// How stable a sweep's runs were: which diverged, per row and scale (the paper's claim
// "converging in every setting in which Pre-LN or Keel diverges" counts them), and which ended far
// above their scale's median. Pure: no I/O.
#pragma once

#include <string>
#include <vector>

#include "client/report/results.h"
#include "client/report/results_format.h"
#include "client/report/table.h"

namespace spheret::client {

// Runs the paper calls unstable: DIVERGED trials (with the step their loss diverged at), and
// trials whose final train loss ends more than `margin` above the median final train loss of the
// trials in their column (data set and scale). One line each, e.g. "trial 7, keel at S: final
// train loss 7.645, 4.512 above the median 3.133 of its scale; 3 loss spikes".
inline constexpr double kUnstableMargin = 1.0;
std::vector<std::string> UnstableRuns(const std::vector<TrialResult>& trials, double margin);

// The DIVERGED trials among a cell's trials: "0 of 3", "1 of 3 (at step 140)".
std::string DivergedText(const std::vector<SeedRun>& runs);

// The stability table of `spikes` (AggregateResults of train/loss_spikes over every trial): one
// line per row and scale with the trials that diverged ("1 of 3 (at step 140)") and the loss
// spikes of the counted ones; a note per row totals its divergences over every scale ("keel:
// diverged 2 of 6 (S 1 of 3, M 1 of 3)"). `exact` (CSV, JSON): columns row, method, p, scale,
// diverged, n_total, diverged_steps, then the loss spikes' mean, std, n at full precision.
Table StabilityTable(const ResultTable& spikes, bool exact, int decimals);

}  // namespace spheret::client
