// The figures drawn: a figure's plan (client/report/plot.h: the gnuplot script and its data
// files) written beside the image and gnuplot run on it. What the report library leaves out to
// stay pure: the files and the process.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/report/plot.h"

namespace spheret::client {

struct PlotFiles {
  std::string figure;                   // the rendered image
  std::string script;                   // FIGURE.gp
  std::vector<std::string> data_files;  // FIGURE-data/SCALE__ROW.dat: step mean std n
  int lines = 0;
};

// Averages each cell's curves over seeds (per step, over the seeds that reached it), writes the
// data and the script, and runs gnuplot (PlanPlot). Fails with the file or the gnuplot error
// named; InvalidArgument when options.out ends in neither .png nor .svg.
absl::StatusOr<PlotFiles> WritePlot(const std::vector<CurveInput>& curves,
                                    const PlotOptions& options);

// A search's figure (PlanRungPlot), written and drawn as WritePlot's.
absl::StatusOr<PlotFiles> WriteRungPlot(const std::vector<CurveInput>& curves,
                                        const std::vector<int64_t>& rung_steps,
                                        const PlotOptions& options);

}  // namespace spheret::client
