// Grid expansion of a sweep spec into trials, done once at submit time.
//
// Axes expand in file order; an axis with `only_for` applies only to grid points whose earlier
// values match (elsewhere it is left out, so `p` multiplies p_spheret's trials only); every point
// runs once per seed; an axis's linked keys (`with:`) take the value at the same index. A trial
// with a `recipe` stores the recipe's settings for its scale under its explicit keys (so the
// stored config is the effective one). Each trial's config is the merged knobs (dataset, base, the
// point, seed),
// checked with the trainer's configuration code, as canonical JSON (sorted keys, no spaces); its
// trial_key is the SHA-256 of that text.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/domain/records.h"
#include "server/sweep/sweep_spec.h"

namespace spheret {

// Asked now and then during long work: OK to go on, or the status to stop with (the caller's
// deadline passed, it went away, the process is stopping).
using Interrupt = std::function<absl::Status()>;

// The trials of `spec` in grid order (axes in file order, seeds innermost). InvalidArgument when
// a trial's merged config is refused by the trainer's checks (naming the key and its line), when
// `p` reaches a method other than p_spheret, when a trial's model is larger than
// limits.max_model_bytes allows, or when the grid exceeds limits.max_trials (counted before any
// trial is built or checked). `interrupt` (when set) is asked every few hundred grid points or
// trials; its first non-OK status is returned as it is.
// Sampled axes: each grid point gets spec.samples draws, and draws that make one trial twice are
// kept once; when that leaves a grid point fewer trials than samples, a line saying how many and
// where is appended to `notices` (when set) for the submitter (SubmitSweepResponse.notices).
absl::StatusOr<std::vector<TrialSpec>> ExpandSweep(const SweepSpec& spec,
                                                   const SweepLimits& limits = {},
                                                   const Interrupt& interrupt = nullptr,
                                                   std::vector<std::string>* notices = nullptr);

}  // namespace spheret
