// The figures drawn: a figure's plan (client/report/plot.h: the gnuplot script and its data
// files) written beside the image and gnuplot run on it. What the report library leaves out to
// stay pure: the files and the process.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>
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

// Figures drawn together (a report's two dozen): Add writes a figure's data and script as
// WritePlot does and queues its drawing; Start draws the figures queued so far in the background,
// so that drawing overlaps what the caller does next (a report's fetching: issue 47); Finish
// starts what is still queued and waits for every figure. Each Start draws its figures, its share
// of them in each of one gnuplot process per core (each script in turn, from its own folder,
// `reset` between them: one start-up of gnuplot and its fonts per process, not per figure). When
// a process fails, Finish draws its share again one figure at a time, so that the error names the
// script. A batch not finished draws only what Start began (its destructor waits for that).
class FigureBatch {
 public:
  explicit FigureBatch(std::string gnuplot) : gnuplot_(std::move(gnuplot)) {}
  ~FigureBatch();
  FigureBatch(const FigureBatch&) = delete;
  FigureBatch& operator=(const FigureBatch&) = delete;
  absl::StatusOr<PlotFiles> Add(const FigurePlan& plan);
  void Start();
  absl::Status Finish();
  size_t queued() const { return queued_.size(); }

 private:
  struct Queued {
    std::string script_path;
    std::string script;
  };
  // The figures of one Start: process k draws figures k, k + processes, ...
  struct Group {
    std::vector<Queued> figures;
    std::vector<std::string> paths;  // the processes' driver scripts (temporary files)
    std::vector<pid_t> pids;         // -1: not started
    absl::Status written;            // a driver that could not be written
  };
  // Waits for the group's processes and removes their drivers; their exit statuses.
  static std::vector<int> Wait(Group& group);
  absl::Status Check(const Group& group, const std::vector<int>& statuses) const;
  std::string gnuplot_;
  std::vector<Queued> queued_;
  std::vector<Group> started_;
};

// Averages each cell's curves over seeds (per step, over the seeds that reached it), writes the
// data and the script, and runs gnuplot (PlanPlot), or with `batch` leaves the drawing to it.
// Fails with the file or the gnuplot error named; InvalidArgument when options.out ends in
// neither .png nor .svg.
absl::StatusOr<PlotFiles> WritePlot(const std::vector<CurveInput>& curves,
                                    const PlotOptions& options, FigureBatch* batch = nullptr);

// A search's figure (PlanRungPlot), written and drawn as WritePlot's.
absl::StatusOr<PlotFiles> WriteRungPlot(const std::vector<CurveInput>& curves,
                                        const std::vector<int64_t>& rung_steps,
                                        const PlotOptions& options);

}  // namespace spheret::client
