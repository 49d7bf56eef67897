// The geometry part of `report` and `plot --diag`: diag series fetched from the coordinator,
// drawn over depth and summarized per trial. Internal to spheret_client.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/connection.h"
#include "client/render/figures.h"
#include "client/report/results.h"
#include "client/report/results_format.h"

namespace spheret::client {

struct DiagPlotOptions {
  std::string field;          // a diag field: hidden_norm, theta, delta, token_cos, delta_sum, ...
  std::string stat = "mean";  // over the training's diag steps
  std::string out;            // FIGURE.png or FIGURE.svg
  std::string title;
  std::string gnuplot = "gnuplot";
};
// InvalidArgument naming --diag unless `field` is a diag field name (1 to 40 of [a-z0-9_]).
absl::Status CheckDiagField(const std::string& field);

// Draws `field` over depth (one point per sublayer update), or over training for a whole-model
// field (sublayer model, e.g. delta_sum), one line per method and panel per scale; returns the
// figure's line count. NotFound when no trial has values of the field.
absl::StatusOr<int> PlotDiagOverDepth(Connection& connection, const std::vector<int64_t>& sweep_ids,
                                      const DiagPlotOptions& options);

// Writes geometry.{txt,md,tex,csv,json} (per method and scale: final ||h|| and its max drift,
// theta mean and max, share at the angle cap, alpha, radial share) and the figures
// geometry_FIELD.{png,svg} over depth (queued in `figures`, whose drawing starts while the later
// fields are fetched: FigureBatch::Start), appending them to `index`; false when no trial has diag
// events (nothing written).
absl::StatusOr<bool> WriteGeometry(Connection& connection, const std::vector<int64_t>& sweep_ids,
                                   std::vector<TrialResult> trials,
                                   const ResultFormatOptions& format_options,
                                   const std::string& dir, FigureBatch* figures,
                                   std::string* index);

}  // namespace spheret::client
