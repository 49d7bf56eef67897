// report --claims: the paper's claims tested over any set of sweeps (client/report/claims.h).
#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "client/commands.h"
#include "client/fetch.h"
#include "client/render/files.h"
#include "client/report/claims.h"
#include "protocol/trainer_events.h"

namespace spheret::client {
namespace {

namespace fs = std::filesystem;

// Every trial of the sweeps with its final values, its sweep's name and its val/loss curve.
absl::StatusOr<std::vector<ClaimTrial>> FetchClaimTrials(Connection& connection,
                                                         const std::vector<int64_t>& sweeps) {
  std::vector<ClaimTrial> trials;
  for (int64_t sweep_id : sweeps) {
    SPHERET_ASSIGN_OR_RETURN(const v1::Sweep sweep, FetchSweep(connection, sweep_id));
    SPHERET_ASSIGN_OR_RETURN(
        std::vector<TrialResult> results,
        FetchResults(connection, {sweep_id}, {protocol::kValLoss, protocol::kTrainLossSpikes}));
    SPHERET_ASSIGN_OR_RETURN(std::vector<CurveInput> curves,
                             FetchCurves(connection, {sweep_id}, protocol::kValLoss));
    std::map<int64_t, const CurveInput*> curve_of;
    for (const CurveInput& curve : curves) curve_of[curve.trial_id] = &curve;
    for (TrialResult& result : results) {
      ClaimTrial trial{std::move(result), sweep.name(), {}, {}};
      auto curve = curve_of.find(trial.result.trial_id);
      if (curve != curve_of.end()) {
        trial.val_steps = curve->second->steps;
        trial.val_losses = curve->second->values;
      }
      trials.push_back(std::move(trial));
    }
  }
  return trials;
}

// "12 comparisons of 5 claims: 3 supported, 1 contradicted, 8 inconclusive".
std::string Tally(const std::vector<ClaimComparison>& comparisons) {
  int verdicts[3] = {0, 0, 0};
  std::vector<const Claim*> claims;
  for (const ClaimComparison& c : comparisons) {
    ++verdicts[static_cast<int>(c.verdict)];
    if (claims.empty() || claims.back() != c.claim) claims.push_back(c.claim);
  }
  return absl::StrCat(comparisons.size(), " comparisons of ", claims.size(),
                      " claims: ", verdicts[0], " supported, ", verdicts[1], " contradicted, ",
                      verdicts[2], " inconclusive");
}

}  // namespace

absl::Status ClaimsReport(Connection& connection, const ReportOptions& options, std::ostream& out) {
  if (!options.paper.empty()) {
    return absl::InvalidArgumentError("--claims and --paper: give one of them");
  }
  SPHERET_ASSIGN_OR_RETURN(const Format format, ParseFormat(options.format));
  if (format == Format::kLatex) {
    return absl::InvalidArgumentError("--claims --format: table, md, csv or json");
  }
  SPHERET_ASSIGN_OR_RETURN(const std::vector<int64_t> sweeps,
                           ResolveSweeps(connection, options.sweeps));
  SPHERET_ASSIGN_OR_RETURN(const std::vector<ClaimTrial> trials,
                           FetchClaimTrials(connection, sweeps));
  const std::vector<ClaimComparison> comparisons = EvaluateClaims(trials);
  if (options.out_dir.empty()) {
    out << RenderClaims(comparisons, format);
    return absl::OkStatus();
  }
  std::error_code error;
  fs::create_directories(options.out_dir, error);
  if (error) return absl::UnavailableError("--out " + options.out_dir + ": " + error.message());
  for (Format each : {Format::kTable, Format::kMarkdown, Format::kCsv, Format::kJson}) {
    SPHERET_RETURN_IF_ERROR(
        WriteTextFile(fs::path(options.out_dir) / ("claims." + FormatExtension(each)),
                      RenderClaims(comparisons, each)));
  }
  out << "wrote claims.{txt,md,csv,json}: " << Tally(comparisons) << "\n";
  return absl::OkStatus();
}

}  // namespace spheret::client
