// results, report, plot: the sweep's final values and curves, aggregated over seeds.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "client/commands.h"
#include "client/fetch.h"
#include "client/geometry_report.h"
#include "client/proto_text.h"
#include "client/render/figures.h"
#include "client/render/files.h"
#include "client/report/baseline.h"
#include "client/report/paper_tables.h"
#include "client/report/results_format.h"
#include "client/report/stability.h"
#include "protocol/metric_catalog.h"

namespace spheret::client {
namespace {

namespace fs = std::filesystem;

// The losses table's metrics: those of the paper's Tables 2 and 3, whose layout it takes
// (train/loss_avg, val/loss, val/ppl).
std::vector<std::string> LossMetrics() {
  return PaperFetchMetrics(
      {PaperOutputSpecOf(PaperOutput::kTable2), PaperOutputSpecOf(PaperOutput::kTable3)});
}

// "2 trials not counted: RUNNING 1, FAILED 1" or "".
std::string LeftOutNote(const ResultTable& table) {
  int total = 0;
  std::vector<std::string> parts;
  for (const auto& [state, count] : table.left_out) {
    total += count;
    parts.push_back(absl::StrCat(state, " ", count));
  }
  if (total == 0) return "";
  return absl::StrCat(total, " trials not counted: ", absl::StrJoin(parts, ", "));
}

// The format options of a table, with the paper's numbers beside ours when `vs_paper`.
ResultFormatOptions PaperFormatOptions(bool vs_paper, const std::string& paper_dataset) {
  ResultFormatOptions format_options;
  if (vs_paper) {
    format_options.paper = &PaperNumbers::Embedded();
    format_options.paper_dataset = paper_dataset;
  }
  return format_options;
}

// Writes `name`.{txt,md,tex,csv,json}; returns the file names.
absl::StatusOr<std::vector<std::string>> WriteTableFiles(const fs::path& dir,
                                                         const std::string& name,
                                                         const Table& text_layout,
                                                         const Table& long_layout) {
  std::vector<std::string> written;
  for (Format format :
       {Format::kTable, Format::kMarkdown, Format::kLatex, Format::kCsv, Format::kJson}) {
    const bool text = format != Format::kCsv && format != Format::kJson;
    const std::string file = name + "." + FormatExtension(format);
    absl::Status status =
        WriteTextFile(dir / file, Render(text ? text_layout : long_layout, format));
    if (!status.ok()) return status;
    written.push_back(file);
  }
  return written;
}

}  // namespace

absl::Status Results(Connection& connection, const ResultsOptions& options, std::ostream& out) {
  if (!options.best_per.empty()) return BestPer(connection, options, out);
  absl::StatusOr<Format> format = ParseFormat(options.format);
  if (!format.ok()) return format.status();
  absl::StatusOr<std::vector<int64_t>> sweeps = ResolveSweeps(connection, options.sweeps);
  if (!sweeps.ok()) return sweeps.status();
  absl::StatusOr<std::vector<TrialResult>> trials =
      FetchResults(connection, *sweeps, options.metrics, options.search_trials);
  if (!trials.ok()) return trials.status();
  std::vector<TrialState> states;  // a name that is no state counts no trial
  for (const std::string& name : options.states) {
    if (std::optional<TrialState> state = ParseTrialState(name)) states.push_back(*state);
  }
  const ResultTable table = AggregateResults(*trials, options.metrics, states);
  const ResultFormatOptions format_options =
      PaperFormatOptions(options.vs_paper, options.paper_dataset);
  if (!options.baseline.empty()) {
    absl::StatusOr<Table> compared =
        BaselineTable(table, options.baseline, *format, format_options.decimals);
    if (!compared.ok()) return compared.status();
    const bool text = *format != Format::kCsv && *format != Format::kJson;
    if (text) out << Render(ResultsTableFor(table, *format, format_options), *format) << "\n";
    out << Render(*compared, *format);
  } else {
    out << Render(ResultsTableFor(table, *format, format_options), *format);
  }
  if (const std::string note = LeftOutNote(table); !note.empty()) std::cerr << note << "\n";
  return absl::OkStatus();
}

namespace {

// A search's figure (WriteRungPlot): its search trials' curves and the first sweep's rungs.
absl::Status PlotSearch(Connection& connection, const std::vector<int64_t>& sweeps,
                        const std::vector<CurveInput>& curves, const PlotCommandOptions& options,
                        const std::string& name, std::ostream& out) {
  absl::StatusOr<v1::Sweep> sweep = FetchSweep(connection, sweeps.front());
  if (!sweep.ok()) return sweep.status();
  std::vector<CurveInput> search;
  int64_t last = 0;
  for (const CurveInput& curve : curves) {
    if (curve.role != "search") continue;
    search.push_back(curve);
    last = std::max(last, curve.steps.back());
  }
  std::vector<int64_t> rungs;
  if (sweep->search_strategy() == "asha" && sweep->search_min_iters() > 0) {
    for (int64_t step = sweep->search_min_iters(); step < last;
         step *= std::max(sweep->search_reduction_factor(), 2)) {
      rungs.push_back(step);
    }
  }
  PlotOptions plot;
  plot.metric = options.metric;
  plot.out = options.out;
  plot.title = absl::StrCat(name, ": ", options.metric, " of each search trial");
  plot.ylim = options.ylim;
  plot.gnuplot = options.gnuplot;
  absl::StatusOr<PlotFiles> files = WriteRungPlot(search, rungs, plot);
  if (!files.ok()) return files.status();
  out << "wrote " << files->figure << " (" << files->lines << " search trials, " << rungs.size()
      << " rungs), " << files->script << DownsampledNote(search) << "\n";
  return absl::OkStatus();
}

}  // namespace

absl::Status Plot(Connection& connection, const PlotCommandOptions& options, std::ostream& out) {
  const std::string extension = fs::path(options.out).extension().string();
  if (extension != ".png" && extension != ".svg") {
    return absl::InvalidArgumentError("--out " + options.out + ": must end in .png or .svg");
  }
  if (!options.diag.empty()) {
    if (absl::Status bad = CheckDiagField(options.diag); !bad.ok()) return bad;
  }
  absl::StatusOr<std::vector<int64_t>> sweeps = ResolveSweeps(connection, options.sweeps);
  if (!sweeps.ok()) return sweeps.status();
  absl::StatusOr<std::string> name = DescribeSweeps(connection, *sweeps);
  if (!name.ok()) return name.status();
  if (!options.diag.empty()) {
    DiagPlotOptions diag{options.diag, options.diag_stat, options.out,
                         absl::StrCat(*name, ": ", options.diag, " (mean over seeds)"),
                         options.gnuplot};
    absl::StatusOr<int> lines = PlotDiagOverDepth(connection, *sweeps, diag);
    if (!lines.ok()) return lines.status();
    out << "wrote " << fs::absolute(options.out).string() << " (" << *lines << " lines)\n";
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<CurveInput>> curves =
      FetchCurves(connection, *sweeps, options.metric, kFigureCurvePoints);
  if (!curves.ok()) return curves.status();
  if (std::any_of(curves->begin(), curves->end(),
                  [](const CurveInput& c) { return c.role == "search"; })) {
    return PlotSearch(connection, *sweeps, *curves, options, *name, out);
  }
  PlotOptions plot;
  plot.metric = options.metric;
  plot.out = options.out;
  plot.title = absl::StrCat(*name, ": ", options.metric, " (mean over seeds)");
  plot.ylim = options.ylim;
  plot.log_x = options.log_x;
  plot.gnuplot = options.gnuplot;
  absl::StatusOr<PlotFiles> files = WritePlot(*curves, plot);
  if (!files.ok()) return files.status();
  out << "wrote " << files->figure << " (" << files->lines << " lines), " << files->script
      << " and " << files->data_files.size() << " data files" << DownsampledNote(*curves) << "\n";
  return absl::OkStatus();
}

namespace {

// The zero-shot table (metrics other than the losses), when any trial has one; returns whether.
absl::StatusOr<bool> WriteZeroShot(const std::vector<TrialResult>& trials,
                                   const ResultFormatOptions& format_options, const fs::path& dir,
                                   std::string* index) {
  std::set<std::string> eval_names;
  for (const TrialResult& trial : trials) {
    for (const auto& [metric, value] : trial.values) {
      if (metric.rfind(kZeroShotPrefix, 0) == 0) eval_names.insert(metric);
    }
  }
  if (!eval_names.empty()) {
    std::vector<std::string> columns(eval_names.begin(), eval_names.end());
    SortZeroShotMetrics(&columns);
    const ResultTable zero_shot = AggregateResults(trials, columns);
    absl::StatusOr<std::vector<std::string>> written =
        WriteTableFiles(dir, "zeroshot", MetricColumnsTable(zero_shot, format_options),
                        LongTable(zero_shot, format_options));
    if (!written.ok()) return written.status();
    absl::StrAppend(index,
                    "Zero-shot scores, accuracies in percent (the layout of the paper's Tables 4 "
                    "and 5; lm-evaluation-harness's metrics):\n\n",
                    Render(MetricColumnsTable(zero_shot, format_options), Format::kMarkdown), "\n");
  }
  return !eval_names.empty();
}

// losses.*: the final losses pivoted by method and scale, and the trials left out.
absl::Status WriteLosses(const ResultTable& losses, const ResultFormatOptions& format_options,
                         const fs::path& dir, std::string* index) {
  absl::StatusOr<std::vector<std::string>> files = WriteTableFiles(
      dir, "losses", PivotTable(losses, format_options), LongTable(losses, format_options));
  if (!files.ok()) return files.status();
  absl::StrAppend(index,
                  "Final train loss (moving average of 200 iterations), val loss and val ppl, "
                  "mean ± std [95% CI] (n seeds) over SUCCEEDED trials (a cell that left seeds out "
                  "says \"(counted of run; why)\" and a note names each seed), the best of each "
                  "column in bold; "
                  "the layout of the paper's Tables 2 and 3:\n\n",
                  Render(PivotTable(losses, format_options), Format::kMarkdown), "\n");
  if (const std::string note = LeftOutNote(losses); !note.empty()) {
    absl::StrAppend(index, note, ".\n\n");
  }
  return absl::OkStatus();
}

// baseline.*: every row against `baseline` over seeds, when one is given.
absl::Status WriteBaseline(const ResultTable& losses, const std::string& baseline,
                           const fs::path& dir, std::string* index) {
  if (baseline.empty()) return absl::OkStatus();
  absl::StatusOr<Table> text = BaselineTable(losses, baseline, Format::kMarkdown, 3);
  if (!text.ok()) return text.status();
  absl::StatusOr<Table> exact = BaselineTable(losses, baseline, Format::kCsv, 3);
  if (!exact.ok()) return exact.status();
  absl::StatusOr<std::vector<std::string>> written =
      WriteTableFiles(dir, "baseline", *text, *exact);
  if (!written.ok()) return written.status();
  absl::StrAppend(index, "Each row against ", baseline,
                  " over seeds: the difference of means (row − ", baseline,
                  "), its 95% confidence interval and two-sided p-value (paired t test over the "
                  "same seeds, Welch's t test otherwise); \"≈ 0\" where the interval includes 0:"
                  "\n\n",
                  Render(*text, Format::kMarkdown), "\n");
  return absl::OkStatus();
}

// stability.*: divergences and loss spikes per method and scale, and the runs that ended
// unstable.
absl::Status WriteStability(const std::vector<TrialResult>& trials, const fs::path& dir,
                            std::string* index) {
  const ResultTable spikes = AggregateResults(trials, {protocol::kTrainLossSpikes});
  const Table text = StabilityTable(spikes, /*exact=*/false, /*decimals=*/1);
  absl::StatusOr<std::vector<std::string>> written =
      WriteTableFiles(dir, "stability", text, StabilityTable(spikes, /*exact=*/true, 1));
  if (!written.ok()) return written.status();
  absl::StrAppend(index,
                  "Divergences per method and scale (the trials whose loss diverged, of the "
                  "trials run) and loss spikes (steps whose train loss exceeded the mean of the "
                  "200 before by spike_margin, 0.5 by default), mean ± std (n seeds):\n\n",
                  Render(text, Format::kMarkdown), "\n");
  const std::vector<std::string> unstable = UnstableRuns(trials, kUnstableMargin);
  absl::StrAppend(index, "Unstable runs (diverged, or a final train loss more than ",
                  kUnstableMargin,
                  " above the median of the same scale): ", unstable.empty() ? "none" : "", "\n\n");
  for (const std::string& line : unstable) absl::StrAppend(index, "- ", line, "\n");
  if (!unstable.empty()) absl::StrAppend(index, "\n");
  return absl::OkStatus();
}

// The loss curves (val/loss, train/loss_avg) as PNG and SVG figures, linked from `index`, drawn
// by `figures`.
absl::Status WriteFigures(Connection& connection, const std::vector<int64_t>& sweeps,
                          const std::string& name, const fs::path& dir, FigureBatch* figures,
                          std::string* index) {
  for (const std::string& metric :
       {std::string(protocol::kValLoss), std::string(protocol::kTrainLossAvg)}) {
    absl::StatusOr<std::vector<CurveInput>> curves =
        FetchCurves(connection, sweeps, metric, kFigureCurvePoints);
    if (!curves.ok()) return curves.status();
    if (curves->empty()) continue;
    const std::string stem = absl::StrReplaceAll(metric, {{"/", "_"}});  // val_loss, ...
    for (const char* extension : {".png", ".svg"}) {
      PlotOptions plot;
      plot.metric = metric;
      plot.out = (dir / (stem + extension)).string();
      plot.title = absl::StrCat(name, ": ", metric, " (mean over seeds)");
      absl::StatusOr<PlotFiles> figure = WritePlot(*curves, plot, figures);
      if (!figure.ok()) return figure.status();
    }
    absl::StrAppend(index, "![", metric, "](", stem, ".png)\n\n");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Report(Connection& connection, const ReportOptions& options, std::ostream& out) {
  if (!options.paper.empty()) return PaperReport(connection, options, out);
  if (options.out_dir.empty()) {
    return absl::InvalidArgumentError(
        "--out DIR is required (or --paper table2|table3|table4|table5 to print one of the "
        "paper's tables)");
  }
  absl::StatusOr<std::vector<int64_t>> sweeps = ResolveSweeps(connection, options.sweeps);
  if (!sweeps.ok()) return sweeps.status();
  absl::StatusOr<std::string> name = DescribeSweeps(connection, *sweeps);
  if (!name.ok()) return name.status();
  const fs::path dir(options.out_dir);
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) return absl::UnavailableError("--out " + options.out_dir + ": " + error.message());
  const std::vector<std::string> loss_metrics = LossMetrics();
  std::vector<std::string> fetched = loss_metrics;
  fetched.push_back(protocol::kTrainLossSpikes);
  absl::StatusOr<std::vector<TrialResult>> trials = FetchResults(connection, *sweeps, fetched);
  if (!trials.ok()) return trials.status();
  const ResultFormatOptions format_options =
      PaperFormatOptions(options.vs_paper, options.paper_dataset);
  std::string index =
      absl::StrCat("# Report of sweep", sweeps->size() > 1 ? "s " : " ", *name, "\n\n");
  const ResultTable losses = AggregateResults(*trials, loss_metrics);
  if (absl::Status status = WriteLosses(losses, format_options, dir, &index); !status.ok()) {
    return status;
  }
  if (absl::Status status = WriteBaseline(losses, options.baseline, dir, &index); !status.ok()) {
    return status;
  }
  if (absl::Status status = WriteStability(*trials, dir, &index); !status.ok()) return status;
  absl::StatusOr<bool> zero_shot = WriteZeroShot(*trials, format_options, dir, &index);
  if (!zero_shot.ok()) return zero_shot.status();
  FigureBatch figures(options.gnuplot);  // drawn together, a gnuplot process per core
  if (absl::Status status = WriteFigures(connection, *sweeps, *name, dir, &figures, &index);
      !status.ok()) {
    return status;
  }
  figures.Start();  // the loss figures draw while the geometry is fetched
  absl::StatusOr<bool> geometry =
      WriteGeometry(connection, *sweeps, *trials, format_options, dir.string(), &figures, &index);
  if (!geometry.ok()) return geometry.status();
  if (absl::Status status = figures.Finish(); !status.ok()) return status;
  if (absl::Status status = WriteTextFile(dir / "README.md", index); !status.ok()) return status;
  out << "wrote the report of sweep" << (sweeps->size() > 1 ? "s " : " ") << *name << " to "
      << dir.string() << " (README.md, losses.*, stability.*" << (*zero_shot ? ", zeroshot.*" : "")
      << (*geometry ? ", geometry.*" : "") << ", figures)\n";
  return absl::OkStatus();
}

}  // namespace spheret::client
