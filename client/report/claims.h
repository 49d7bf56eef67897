// The paper's claims as tests: each claim that a set of sweeps can test, evaluated over their
// trials (`spheret report --claims`). A claim is data: the paper's words and section, the two
// kinds of rows it compares (A and B), how rows are paired, the metric, the direction the paper
// states and the test. Each comparison of an A row with a B row in one column (data set and
// scale) gives the effect A − B, its 95% t interval and two-sided p (paired over shared seeds,
// Welch otherwise: CompareOverSeeds), or for divergences the counts and Fisher's exact p, the
// confounds between the two rows (confounds.h) and a verdict by the rule of VerdictRule().
// Pure: no I/O, no RPC types.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "client/report/confounds.h"
#include "client/report/results.h"
#include "client/report/stats.h"
#include "client/report/table.h"

namespace spheret::client {

// One trial as the claims read it.
struct ClaimTrial {
  TrialResult result;  // state, config, final values (val/loss, train/loss_spikes)
  std::string sweep;   // its sweep's name: tells apart repeats of one config in several sweeps
  std::vector<int64_t> val_steps;  // its val/loss curve (steps to reach a loss)
  std::vector<double> val_losses;
};

// Which rows play a role in a claim: by method and the two knobs the paper ablates.
enum class AngleCap { kAny, kQuarterPi, kHalfPi, kFinite, kNone };
struct RowRole {
  std::string name;                     // "SpheretNorm", "Pre-LN", "uncapped", ...
  std::set<std::string> methods;        // empty: any method
  AngleCap angle_max = AngleCap::kAny;  // the effective angle_max
  std::optional<bool> scalenorm;        // the effective scalenorm
  // Only rows whose update reads angle_max: geonorm, cay_spheret, p_spheret with p > 1.
  bool capped_method = false;
};

// How A rows meet B rows in a column. kPaperSettings: every A row with every B row, both at the
// paper's settings (angle_max π/4 and ScaleNorm as §4.2 gives it: on for the SpheretNorm family,
// off otherwise); they may differ in scalenorm (the paper's design, listed as a confound), and a
// confound in any other key makes the comparison inconclusive. kMatched: an A row with each B
// row whose effective config is equal in every key but the claim's `varied` keys and the seed.
enum class Pairing { kPaperSettings, kMatched };

// What is compared over the rows' trials.
enum class ClaimMetric {
  kFinalValLoss,  // val/loss's last value, SUCCEEDED trials
  kLossSpikes,    // train/loss_spikes's last value, SUCCEEDED trials
  kStepsToLoss,   // the first val/loss step at or below the loss every counted trial of both
                  // rows reaches (the largest of their minima), SUCCEEDED trials
  kDivergences,   // DIVERGED trials among the SUCCEEDED and DIVERGED: Fisher's exact test
};

struct Claim {
  std::string id;
  std::string words;    // the paper's words in quotes, or "Paraphrased: ..."
  std::string section;  // "§4.2", "Tables 2–3", or "–" where the sources do not place it
  RowRole a;
  RowRole b;
  Pairing pairing = Pairing::kPaperSettings;
  std::set<std::string> varied;  // kMatched: the keys that tell A from B (beside method, p, seed)
  ClaimMetric metric = ClaimMetric::kFinalValLoss;
  bool a_lower = true;     // the paper says A's value is below B's
  bool best_of_a = false;  // compare only the A row of lowest mean final val loss in a column
  // Divergences: "in every setting in which B diverges, A converges": tested only where B
  // diverged, and one divergence of A there contradicts it.
  bool universal = false;
};

// The claims of the paper that spheret tests, in the order the report prints them.
const std::vector<Claim>& PaperClaims();

enum class Verdict { kSupported, kContradicted, kInconclusive };
std::string VerdictText(Verdict verdict);  // "supported", "contradicted", "inconclusive"

// The documented rule, one sentence per case (docs/cli.md, "The claims report").
std::vector<std::string> VerdictRule();

// One A row against one B row of a column.
struct ClaimComparison {
  const Claim* claim = nullptr;
  std::string column;  // the data set and scale
  std::string a_row;   // row labels (CellsOf over effective configs; "[sweep]" for repeats)
  std::string b_row;
  std::vector<int64_t> a_trials;  // the counted trials, in seed order
  std::vector<int64_t> b_trials;
  std::vector<double> a_values;  // their values (kDivergences: 1 diverged, 0 not)
  std::vector<double> b_values;
  std::string test;       // "paired t", "Welch t", "Fisher exact", or why there is none
  Difference difference;  // mean tests (CompareOverSeeds of A and B)
  double mean_a = 0;      // means (kDivergences: the divergence rates)
  double mean_b = 0;
  int diverged_a = 0;  // kDivergences
  int diverged_b = 0;
  double fisher_p = 0;   // kDivergences
  double threshold = 0;  // kStepsToLoss: the loss to reach; NaN otherwise
  std::vector<std::string>
      left_out;  // trials of the rows not counted, e.g. "keel: trial 12 FAILED"
  std::vector<Confound> confounds;
  std::vector<std::string> disallowed;  // confounded keys that make it inconclusive
  Verdict verdict = Verdict::kInconclusive;
  std::string reason;  // why the verdict, in words
};

// Every comparison of every claim that the trials can test, claim by claim in PaperClaims()
// order, then by column and rows. A claim with no pair of rows in any column gives none.
std::vector<ClaimComparison> EvaluateClaims(const std::vector<ClaimTrial>& trials,
                                            const std::vector<Claim>& claims = PaperClaims());

// The verdict of one comparison by VerdictRule() from its figures (exposed for tests).
void Decide(ClaimComparison* comparison);

// The report: CSV and JSON one record per comparison at full precision (claim, words, section,
// column, rows, metric, test, n, means, effect, interval, t, df, p, counts, threshold, trials,
// left out, confounds, verdict, reason); text and Markdown a summary of verdicts per claim, then
// per claim its words and a table of its comparisons with the confounds and left-out trials as
// notes, and the rule. `decimals` for losses in text formats.
std::string RenderClaims(const std::vector<ClaimComparison>& comparisons, Format format,
                         int decimals = 4);
// The CSV/JSON records as a Table (the SciPy check reads the JSON).
Table ClaimsRecords(const std::vector<ClaimComparison>& comparisons);

}  // namespace spheret::client
