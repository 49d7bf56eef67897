// Figures from curves: one panel per scale (per data set and scale when the curves span several),
// one line per method (mean over seeds), as a gnuplot script and its data files, planned here
// (pure: the texts and the paths they go to) and written and drawn by client/render/figures.h.
// The data files and the script are kept beside the figure so it can be edited and redrawn
// (`gnuplot FIGURE.gp`).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "client/report/table.h"
#include "config/trial_config.h"
#include "protocol/metric_catalog.h"
#include "protocol/trial_states.h"

namespace spheret::client {

struct CurveInput {
  int64_t trial_id = 0;
  TrialConfig config;
  std::vector<int64_t> steps;
  std::vector<double> values;
  TrialState state = TrialState::kPending;
  std::string role{};  // "search", "confirm" (a search: block's trials) or ""
  // The curve's points before the coordinator downsampled it for a figure (client/fetch.h's
  // kFigureCurvePoints); steps.size() or 0 when it kept them all.
  int64_t points = 0;
};

struct PlotOptions {
  std::string metric = protocol::kValLoss;
  std::string out;    // FIGURE.png or FIGURE.svg
  std::string title;  // above the panels
  std::string ylim;   // "lo:hi", empty for automatic
  std::string xlabel = "step";
  bool log_x = false;
  std::string gnuplot = "gnuplot";
};

// A figure's files before they are written: the gnuplot script and the data files it reads, each
// with its path (beside the image: FIGURE.gp and FIGURE-data/...).
struct FigurePlan {
  std::string figure;       // the image gnuplot draws
  std::string script_path;  // FIGURE.gp
  std::string script;
  std::string data_dir;                                   // FIGURE-data
  std::vector<std::pair<std::string, std::string>> data;  // (path, text), in the script's order
  int lines = 0;
};

// The plan of WritePlot (client/render/figures.h) for the image at `out` (an absolute path; its
// extension is checked there): each cell's curves averaged over seeds (per step, over the seeds
// that reached it), FIGURE-data/SCALE__ROW.dat (step mean std n) and the script. NotFound when
// there are no curves.
absl::StatusOr<FigurePlan> PlanPlot(const std::vector<CurveInput>& curves,
                                    const PlotOptions& options, const std::string& out);

// A figure's data as tables, each cell's curve averaged over seeds as WritePlot draws it. `exact`:
// one row per (scale, row, step) with mean, std and n (CSV, JSON); `wide`: one row per method row
// and a column per scale and step, at up to `max_steps` steps of each scale spread evenly over its
// curve and always its last, the mean to 4 decimals (text, Markdown, LaTeX).
struct CurveTables {
  Table wide;
  Table exact;
};
// A search's figure: one line per search trial (a pruned one faded, so the survivors stand out),
// coloured by its row (method and p), with the ASHA rungs at `rung_steps` as dashed verticals;
// FIGURE-data/trial-ID.dat (step value) per trial. NotFound when there are no curves.
absl::StatusOr<FigurePlan> PlanRungPlot(const std::vector<CurveInput>& curves,
                                        const std::vector<int64_t>& rung_steps,
                                        const PlotOptions& options, const std::string& out);

CurveTables CurveTablesOf(const std::vector<CurveInput>& curves, int max_steps = 6);

}  // namespace spheret::client
