// report --paper: the paper's Tables 2-5 and Figures 2-3 in its layout, from any set of sweeps.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "client/commands.h"
#include "client/fetch.h"
#include "client/report/files.h"
#include "client/report/paper_layout.h"
#include "client/report/paper_tables.h"
#include "client/report/plot.h"
#include "client/report/seed_account.h"

namespace spheret::client {
namespace {

namespace fs = std::filesystem;

// The trials of the sweeps, each with the corpus it stands for (CorpusOf: the data set, else the
// sweep's name).
absl::StatusOr<std::vector<PaperTrial>> FetchPaperTrials(Connection& connection,
                                                         const std::vector<int64_t>& sweeps) {
  std::vector<PaperTrial> trials;
  for (int64_t sweep_id : sweeps) {
    absl::StatusOr<v1::Sweep> sweep = FetchSweep(connection, sweep_id);
    if (!sweep.ok()) return sweep.status();
    absl::StatusOr<std::vector<TrialResult>> results =
        FetchResults(connection, {sweep_id}, PaperFetchMetrics());
    if (!results.ok()) return results.status();
    for (TrialResult& result : *results) {
      const std::string corpus = CorpusOf(result.config, sweep->name());
      trials.push_back({std::move(result), corpus});
    }
  }
  return trials;
}

// The outputs `--paper` names: one of the six, or all.
absl::StatusOr<std::vector<PaperOutput>> RequestedOutputs(const std::vector<std::string>& names) {
  std::vector<PaperOutput> outputs;
  for (const std::string& name : names) {
    if (name == "all") {
      for (const char* each : {"table2", "table3", "table4", "table5", "figure2", "figure3"}) {
        const PaperOutput output = *ParsePaperOutput(each);
        if (std::find(outputs.begin(), outputs.end(), output) == outputs.end()) {
          outputs.push_back(output);
        }
      }
      continue;
    }
    absl::StatusOr<PaperOutput> output = ParsePaperOutput(name);
    if (output.ok() && std::find(outputs.begin(), outputs.end(), *output) != outputs.end()) {
      continue;  // named twice (or also by "all")
    }
    if (!output.ok()) {
      return absl::InvalidArgumentError("--paper: '" + name +
                                        "' is not one of table2, table3, table4, table5, "
                                        "figure2, figure3, all");
    }
    outputs.push_back(*output);
  }
  return outputs;
}

// The figure's tables with the seeds its lines leave out and the confounds of its panels: a note
// each (md, tex, txt) and, on every line of the exact table, the cell's seeds run (n_total), the
// ones left out (left_out) and its panel's confounds.
void AddFigureSeeds(const FigureSeeds& seeds, const std::vector<CurveInput>& kept,
                    CurveTables* tables) {
  tables->wide.notes.insert(tables->wide.notes.end(), seeds.notes.begin(), seeds.notes.end());
  std::vector<TrialConfig> configs;
  for (const CurveInput& curve : kept) configs.push_back(curve.config);
  const std::vector<TrialCell> cells = CellsOf(configs);  // as the figure groups its lines
  std::map<std::string, std::string> paper_cell;          // "scale|label" -> "ROW at SCALE"
  std::map<std::string, int> drawn;
  std::map<std::string, std::string> scale_of;  // column id -> the preset (confounds per panel)
  for (size_t i = 0; i < kept.size(); ++i) {
    const std::string key = cells[i].scale + "|" + cells[i].row.label;
    scale_of[cells[i].scale] = cells[i].column.scale;
    auto cell = seeds.cell_of.find(kept[i].trial_id);
    if (cell != seeds.cell_of.end()) paper_cell[key] = cell->second;
    ++drawn[key];
  }
  tables->exact.header.insert(tables->exact.header.end(), {"n_total", "left_out", "confounds"});
  tables->exact.numeric.insert(tables->exact.numeric.end(), {true, false, false});
  for (std::vector<std::string>& line : tables->exact.rows) {
    const std::string key = line[0] + "|" + line[1];  // scale, row
    auto lost = seeds.seeds.find(paper_cell[key]);
    const bool any = lost != seeds.seeds.end();
    line.push_back(std::to_string(any ? lost->second.total() : drawn[key]));
    line.push_back(any ? LostSeedsText(lost->second) : "");
    auto confounds = seeds.confounds.find(scale_of[line[0]]);
    line.push_back(confounds == seeds.confounds.end() ? "" : confounds->second);
  }
}

// Figure 2 or 3: train and val loss curves of one corpus's trials, a panel per scale.
absl::StatusOr<std::string> WritePaperFigure(Connection& connection, PaperOutput output,
                                             const std::vector<int64_t>& sweeps,
                                             const std::vector<PaperTrial>& trials,
                                             const ReportOptions& options) {
  absl::StatusOr<std::vector<int64_t>> ids = FigureTrials(output, trials);
  if (!ids.ok()) return ids.status();
  absl::StatusOr<FigureSeeds> seeds = FigureSeedsOf(output, trials);
  if (!seeds.ok()) return seeds.status();
  const std::set<int64_t> wanted(ids->begin(), ids->end());
  const std::string name = PaperOutputName(output);
  std::vector<std::string> written;
  for (const PaperColumnSpec& curve : PaperOutputSpecOf(output).columns) {
    const std::string& metric = curve.metric;
    const std::string& stem = curve.heading;
    absl::StatusOr<std::vector<CurveInput>> curves = FetchCurves(connection, sweeps, metric);
    if (!curves.ok()) return curves.status();
    std::vector<CurveInput> kept;
    for (CurveInput& curve : *curves) {
      if (wanted.count(curve.trial_id)) kept.push_back(std::move(curve));
    }
    if (kept.empty()) {
      return absl::NotFoundError(absl::StrCat(name, ": no trial of ", PaperOutputCorpus(output),
                                              " in the given sweeps has a ", metric, " curve"));
    }
    // The figure as tables too: its curves' means at a few steps, and every step exactly.
    CurveTables tables = CurveTablesOf(kept);
    AddFigureSeeds(*seeds, kept, &tables);
    const std::string base = name + "_" + stem + "_loss";
    for (Format format :
         {Format::kTable, Format::kMarkdown, Format::kLatex, Format::kCsv, Format::kJson}) {
      const bool exact = format == Format::kCsv || format == Format::kJson;
      SPHERET_RETURN_IF_ERROR(
          WriteTextFile(fs::path(options.out_dir) / (base + "." + FormatExtension(format)),
                        Render(exact ? tables.exact : tables.wide, format)));
    }
    written.push_back(base + ".{txt,md,tex,csv,json}");
    for (const char* extension : {".png", ".svg"}) {
      PlotOptions plot;
      plot.metric = metric;
      plot.out = (fs::path(options.out_dir) / (name + "_" + stem + "_loss" + extension)).string();
      plot.title = absl::StrCat(name, ": ", stem, " loss on ", PaperOutputCorpus(output),
                                " (mean over seeds)");
      plot.gnuplot = options.gnuplot;
      absl::StatusOr<PlotFiles> figure = WritePlot(kept, plot);
      if (!figure.ok()) return figure.status();
      written.push_back(fs::path(figure->figure).filename().string());
    }
  }
  return absl::StrJoin(written, ", ");
}

// A table printed to `out` in options.format, or written as NAME.{txt,md,tex,csv,json}.
absl::Status EmitPaperTable(PaperOutput output, const std::vector<PaperTrial>& trials,
                            const ReportOptions& options, std::ostream& out) {
  PaperTableOptions table_options;
  if (options.vs_paper) table_options.paper = &PaperNumbers::Embedded();
  absl::StatusOr<PaperTableData> data = BuildPaperTable(output, trials, table_options);
  if (!data.ok()) return data.status();
  const Table text = PaperTableText(*data, table_options);
  const Table long_rows = PaperTableLong(*data);
  if (options.out_dir.empty()) {
    absl::StatusOr<Format> format = ParseFormat(options.format);
    if (!format.ok()) return format.status();
    const bool exact = *format == Format::kCsv || *format == Format::kJson;
    out << Render(exact ? long_rows : text, *format);
    return absl::OkStatus();
  }
  const std::string name = PaperOutputName(output);
  for (Format format :
       {Format::kTable, Format::kMarkdown, Format::kLatex, Format::kCsv, Format::kJson}) {
    const bool exact = format == Format::kCsv || format == Format::kJson;
    SPHERET_RETURN_IF_ERROR(
        WriteTextFile(fs::path(options.out_dir) / (name + "." + FormatExtension(format)),
                      Render(exact ? long_rows : text, format)));
  }
  out << "wrote " << name << ".{txt,md,tex,csv,json}: " << data->title << "\n";
  return absl::OkStatus();
}

}  // namespace

absl::Status PaperReport(Connection& connection, const ReportOptions& options, std::ostream& out) {
  absl::StatusOr<std::vector<PaperOutput>> outputs = RequestedOutputs(options.paper);
  if (!outputs.ok()) return outputs.status();
  const bool figures = std::any_of(outputs->begin(), outputs->end(), IsPaperFigure);
  if (options.out_dir.empty() && (figures || outputs->size() > 1)) {
    return absl::InvalidArgumentError(
        "--paper: figures and more than one output are written to a folder: give --out DIR");
  }
  absl::StatusOr<std::vector<int64_t>> sweeps = ResolveSweeps(connection, options.sweeps);
  if (!sweeps.ok()) return sweeps.status();
  absl::StatusOr<std::vector<PaperTrial>> trials = FetchPaperTrials(connection, *sweeps);
  if (!trials.ok()) return trials.status();
  if (!options.out_dir.empty()) {
    std::error_code error;
    fs::create_directories(options.out_dir, error);
    if (error) return absl::UnavailableError("--out " + options.out_dir + ": " + error.message());
  }
  const bool all =
      std::find(options.paper.begin(), options.paper.end(), "all") != options.paper.end();
  for (PaperOutput output : *outputs) {
    if (!IsPaperFigure(output)) {
      SPHERET_RETURN_IF_ERROR(EmitPaperTable(output, *trials, options, out));
      continue;
    }
    absl::StatusOr<std::string> files =
        WritePaperFigure(connection, output, *sweeps, *trials, options);
    if (all && absl::IsNotFound(files.status())) {  // `all` writes what the sweeps hold
      out << "skipped " << files.status().message() << "\n";
      continue;
    }
    if (!files.ok()) return files.status();
    out << "wrote " << *files << ": " << PaperOutputName(output) << ", train and val loss on "
        << PaperOutputCorpus(output) << "\n";
  }
  return absl::OkStatus();
}

}  // namespace spheret::client
