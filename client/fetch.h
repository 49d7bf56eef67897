// What the report commands read from the coordinator, over one or several sweeps. Internal to
// spheret_client.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/connection.h"
#include "client/report/geometry.h"
#include "client/report/plot.h"
#include "client/report/results.h"
#include "config/trial_config.h"

namespace spheret::client {

// Every sweep the coordinator holds, through all pages of ListSweeps.
absl::StatusOr<std::vector<v1::Sweep>> AllSweeps(Connection& connection);

// Sweeps named on the command line: each argument is a sweep id, a sweep name (every sweep of
// that name) or a glob of names ("table2-*"); in the order given, each sweep once. NotFound names
// the argument that matched none.
absl::StatusOr<std::vector<int64_t>> ResolveSweeps(Connection& connection,
                                                   const std::vector<std::string>& arguments);
// One sweep's record (GetSweep): its name, state and counts.
absl::StatusOr<v1::Sweep> FetchSweep(Connection& connection, int64_t sweep_id);
// "3 (table2-cpu)" or "3 (table2-cpu), 4 (table3-cpu)".
absl::StatusOr<std::string> DescribeSweeps(Connection& connection,
                                           const std::vector<int64_t>& sweep_ids);

// A trial, its attempts and its latest `max_events` stored events (oldest first), through every
// page of GetTrialLogs.
absl::StatusOr<v1::TrialLogs> FetchTrialLogs(Connection& connection, int64_t trial_id,
                                             int max_events);

// Every trial of the sweeps with the last value of each metric and its zero-shot scores (failed
// evaluations are said on stderr). A sweep that has confirm trials (its search: block's confirm)
// gives those and leaves its search trials out (said on stderr), unless `search_trials`.
absl::StatusOr<std::vector<TrialResult>> FetchResults(Connection& connection,
                                                      const std::vector<int64_t>& sweep_ids,
                                                      const std::vector<std::string>& metrics,
                                                      bool search_trials = false);
// The points a curve drawn in a figure keeps at most (StreamCurvesRequest.max_points): a panel is
// 480 to 1,000 pixels wide, and the coordinator keeps each bucket's first, last, smallest, largest
// and first NaN point (server/curve_downsample.h), so no spike or gap is lost to it. A campaign's
// every-step train/loss (50,000 points a trial) is read as at most this.
inline constexpr int64_t kFigureCurvePoints = 4000;

// The curves of `metric` of every trial of the sweeps that has values of it: every point with
// `max_points` 0 (tables, exports, statistics), else downsampled by the coordinator to at most
// that many points a curve (figures: kFigureCurvePoints); CurveInput::points says how many it had.
absl::StatusOr<std::vector<CurveInput>> FetchCurves(Connection& connection,
                                                    const std::vector<int64_t>& sweep_ids,
                                                    const std::string& metric,
                                                    int64_t max_points = 0);

// "" when every curve kept all its points; else what `plot` says after its figure: how many
// curves were downsampled and how many of their points were drawn.
std::string DownsampledNote(const std::vector<CurveInput>& curves);

// The per-layer values of `field` (a diag field name) of every trial of the sweeps that has
// some: a series per trial and (layer, sublayer).
absl::StatusOr<std::vector<DiagSeries>> FetchLayerValues(Connection& connection,
                                                         const std::vector<int64_t>& sweep_ids,
                                                         const std::string& field);

// A trial's config as the coordinator sent it, read once here where it enters the CLI: the
// commands pass the TrialConfig on and never parse the text again (as the results, curves and
// layer values above carry theirs).
TrialConfig ConfigOf(const v1::Trial& trial);
// A dry run's trial configs, in the reply's order.
std::vector<TrialConfig> ConfigsOf(const v1::SubmitSweepResponse& dry_run);

}  // namespace spheret::client
