// Figures from curves: one panel per scale (per data set and scale when the curves span several),
// one line per method (mean over seeds), rendered by
// gnuplot. The data files and the gnuplot script are kept beside the figure so it can be edited
// and redrawn (`gnuplot FIGURE.gp`).
#pragma once

#include <cstdint>
#include <string>
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

struct PlotFiles {
  std::string figure;                   // the rendered image
  std::string script;                   // FIGURE.gp
  std::vector<std::string> data_files;  // FIGURE-data/SCALE__ROW.dat: step mean std n
  int lines = 0;
};

// Averages each cell's curves over seeds (per step, over the seeds that reached it), writes the
// data and the script, and runs gnuplot. Fails with the file or the gnuplot error named.
absl::StatusOr<PlotFiles> WritePlot(const std::vector<CurveInput>& curves,
                                    const PlotOptions& options);

// A figure's data as tables, each cell's curve averaged over seeds as WritePlot draws it. `exact`:
// one row per (scale, row, step) with mean, std and n (CSV, JSON); `wide`: one row per method row
// and a column per scale and step, at up to `max_steps` steps of each scale spread evenly over its
// curve and always its last, the mean to 4 decimals (text, Markdown, LaTeX).
struct CurveTables {
  Table wide;
  Table exact;
};
// A search's figure: one line per search trial (a PRUNED one faded, so the survivors stand out),
// coloured by its row (method and p), with the ASHA rungs at `rung_steps` as dashed verticals.
absl::StatusOr<PlotFiles> WriteRungPlot(const std::vector<CurveInput>& curves,
                                        const std::vector<int64_t>& rung_steps,
                                        const PlotOptions& options);

CurveTables CurveTablesOf(const std::vector<CurveInput>& curves, int max_steps = 6);

}  // namespace spheret::client
