#include "client/report/plot.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "client/report/files.h"
#include "client/report/results.h"
#include "client/report/table.h"

namespace spheret::client {
namespace {

namespace fs = std::filesystem;

// step -> values of the seeds that reached it
using MeanCurve = std::map<int64_t, std::vector<double>>;

std::string FileSafe(const std::string& text) {
  std::string safe;
  for (char c : text)
    safe += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-') ? c : '_';
  return safe;
}

std::string Quoted(const std::string& text) {  // a gnuplot single-quoted string
  return "'" + absl::StrReplaceAll(text, {{"'", "''"}}) + "'";
}

// Runs `gnuplot SCRIPT` in the script's folder; its stderr goes to ours.
absl::Status RunGnuplot(const std::string& gnuplot, const fs::path& script) {
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    if (chdir(script.parent_path().c_str()) != 0) _exit(126);
    execlp(gnuplot.c_str(), gnuplot.c_str(), script.filename().c_str(), nullptr);
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
    return absl::FailedPreconditionError("'" + gnuplot +
                                         "' not found: install gnuplot (make deps installs "
                                         "gnuplot-nox) or pass --gnuplot PATH");
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError("gnuplot failed on " + script.string() + " (its message is above)");
  }
  return absl::OkStatus();
}

std::string DataText(const MeanCurve& curve) {
  std::string text = "# step mean std n\n";
  for (const auto& [step, values] : curve) {
    Aggregate aggregate = Summarize(values);
    absl::StrAppend(&text, step, " ", ExactNumber(aggregate.mean), " ",
                    aggregate.n > 1 ? ExactNumber(aggregate.std) : "0", " ", aggregate.n, "\n");
  }
  return text;
}

std::string TerminalFor(const fs::path& out, int panels) {
  const int width = std::max(640, 480 * panels);
  if (out.extension() == ".svg") {
    return absl::StrCat("set terminal svg size ", width, ",420 dynamic noenhanced font 'sans,11'");
  }
  return absl::StrCat("set terminal pngcairo size ", width, ",420 noenhanced font 'sans,10'");
}

// The curves by panel (scale) and line (method row, mean over seeds), both in table order.
struct Panels {
  std::map<std::string, std::map<std::string, MeanCurve>> by_scale;  // scale -> label -> curve
  std::vector<ResultRowKey> rows;
  std::vector<std::string> scales;
  std::map<std::string, ResultColumn> columns;
};

Panels GroupCurves(const std::vector<CurveInput>& curves) {
  Panels panels;
  std::vector<TrialConfig> configs;
  for (const CurveInput& curve : curves) configs.push_back(curve.config);
  const std::vector<TrialCell> cells = CellsOf(configs);
  std::map<std::string, ResultRowKey> rows;
  for (size_t i = 0; i < curves.size(); ++i) {
    rows[cells[i].row.label] = cells[i].row;
    panels.columns[cells[i].scale] = cells[i].column;
    MeanCurve& curve = panels.by_scale[cells[i].scale][cells[i].row.label];
    for (size_t k = 0; k < curves[i].steps.size(); ++k) {
      if (std::isfinite(curves[i].values[k]))
        curve[curves[i].steps[k]].push_back(curves[i].values[k]);
    }
  }
  for (const auto& [label, row] : rows) panels.rows.push_back(row);
  SortRows(&panels.rows);
  for (const auto& [scale, unused] : panels.by_scale) panels.scales.push_back(scale);
  SortColumns(panels.columns, &panels.scales);
  return panels;
}

// gnuplot takes a coordinate above about a quarter of DBL_MAX for undefined ("all points y value
// undefined!"): values beyond kLargestDrawn are drawn divided by a power of ten, which the y label
// states (issue 44, item 12: finite diag values near 1e308).
constexpr double kLargestDrawn = 1e300;

// 1, or the power of ten the figure's values are divided by so that gnuplot draws them.
double YScale(const Panels& panels) {
  double largest = 0;
  for (const auto& [scale, panel] : panels.by_scale) {
    for (const auto& [label, curve] : panel) {
      for (const auto& [step, values] : curve) {
        const double mean = std::fabs(Summarize(values).mean);
        if (std::isfinite(mean)) largest = std::max(largest, mean);
      }
    }
  }
  return largest > kLargestDrawn ? std::pow(10.0, std::floor(std::log10(largest))) : 1.0;
}

// What gnuplot does by itself, with a warning on stderr, when a panel's values are all one
// number: widen x by 1 each side and y by 1% (by 1 at 0). Set beforehand, the report runs quietly.
std::string RangesFor(const std::map<std::string, MeanCurve>& panel, const PlotOptions& options,
                      double y_scale) {
  double x_min = INFINITY, x_max = -INFINITY, y_min = INFINITY, y_max = -INFINITY;
  for (const auto& [label, curve] : panel) {
    for (const auto& [step, values] : curve) {
      const double mean = Summarize(values).mean / y_scale;
      x_min = std::min(x_min, static_cast<double>(step));
      x_max = std::max(x_max, static_cast<double>(step));
      y_min = std::min(y_min, mean);
      y_max = std::max(y_max, mean);
    }
  }
  std::string ranges;
  if (!options.log_x) {
    absl::StrAppend(&ranges, x_min == x_max ? absl::StrCat("set xrange [", ExactNumber(x_min - 1),
                                                           ":", ExactNumber(x_max + 1), "]\n")
                                            : "set autoscale x\n");
  }
  if (options.ylim.empty() && std::isfinite(y_min)) {
    const double pad = y_min == 0 ? 1 : std::abs(y_min) * 0.01;
    absl::StrAppend(&ranges, y_min == y_max ? absl::StrCat("set yrange [", ExactNumber(y_min - pad),
                                                           ":", ExactNumber(y_max + pad), "]\n")
                                            : "set autoscale y\n");
  }
  return ranges;
}

// One panel (a scale): a line per row, in table order (a curve of one point is drawn as a point).
absl::Status AddPanel(const std::string& scale, const std::map<std::string, MeanCurve>& panel,
                      const std::vector<ResultRowKey>& row_order, const PlotOptions& options,
                      double y_scale, const fs::path& data_dir, std::string* script,
                      PlotFiles* files) {
  const std::string y = y_scale == 1 ? "2" : absl::StrCat("($2/", ExactNumber(y_scale), ")");
  std::vector<std::string> plots;
  int color = 1;
  for (const ResultRowKey& row : row_order) {
    auto curve = panel.find(row.label);
    ++color;
    if (curve == panel.end() || curve->second.empty()) continue;
    const fs::path data = data_dir / (FileSafe(scale) + "__" + FileSafe(row.label) + ".dat");
    if (absl::Status status = WriteTextFile(data, DataText(curve->second)); !status.ok())
      return status;
    files->data_files.push_back(data.string());
    const char* style =
        curve->second.size() == 1 ? " with points pt 7 ps 1.5 lc " : " with lines lw 2 lc ";
    plots.push_back(absl::StrCat(Quoted((data_dir.filename() / data.filename()).string()),
                                 " using 1:", y, style, color, " title ", Quoted(row.label)));
    ++files->lines;
  }
  if (plots.empty()) return absl::OkStatus();
  absl::StrAppend(script, RangesFor(panel, options, y_scale), "set title ",
                  Quoted("scale " + scale), "\nplot ", absl::StrJoin(plots, ", \\\n     "), "\n");
  return absl::OkStatus();
}

// One trial's curve as FOLDER/trial-ID.dat ("step value" lines).
absl::StatusOr<fs::path> WriteCurveData(const CurveInput& curve, const fs::path& folder) {
  const fs::path data = folder / absl::StrCat("trial-", curve.trial_id, ".dat");
  std::string text = "# step value\n";
  for (size_t k = 0; k < curve.steps.size(); ++k) {
    absl::StrAppend(&text, curve.steps[k], " ", ExactNumber(curve.values[k]), "\n");
  }
  if (absl::Status status = WriteTextFile(data, text); !status.ok()) return status;
  return data;
}

}  // namespace

absl::StatusOr<PlotFiles> WritePlot(const std::vector<CurveInput>& curves,
                                    const PlotOptions& options) {
  const fs::path out = fs::absolute(options.out);
  if (out.extension() != ".png" && out.extension() != ".svg") {
    return absl::InvalidArgumentError("--out " + options.out + ": must end in .png or .svg");
  }
  if (curves.empty()) {
    return absl::NotFoundError("no trial of this sweep has values of '" + options.metric + "'");
  }
  Panels panels = GroupCurves(curves);
  auto& by_scale = panels.by_scale;
  const std::vector<ResultRowKey>& row_order = panels.rows;
  const std::vector<std::string>& scales = panels.scales;

  const double y_scale = YScale(panels);
  const std::string ylabel =
      y_scale == 1 ? options.metric
                   : absl::StrCat(options.metric, " (values / ", ExactNumber(y_scale), ")");
  PlotFiles files;
  files.figure = out.string();
  const fs::path data_dir = out.parent_path() / (out.stem().string() + "-data");
  std::error_code error;
  fs::create_directories(data_dir, error);
  if (error)
    return absl::UnavailableError("cannot create " + data_dir.string() + ": " + error.message());
  std::string script = absl::StrCat(
      "# Drawn by `spheret plot`; edit and run `gnuplot ", out.stem().string(), ".gp` here.\n",
      TerminalFor(out, static_cast<int>(scales.size())), "\nset output ",
      Quoted(out.filename().string()), "\nset multiplot layout 1,", scales.size(), " title ",
      Quoted(options.title), "\nset xlabel ", Quoted(options.xlabel), "\nset ylabel ",
      Quoted(ylabel), "\nset key top right\nset grid\n");
  if (!options.ylim.empty()) absl::StrAppend(&script, "set yrange [", options.ylim, "]\n");
  if (options.log_x) absl::StrAppend(&script, "set logscale x\n");
  for (const std::string& scale : scales) {
    if (absl::Status status = AddPanel(scale, by_scale[scale], row_order, options, y_scale,
                                       data_dir, &script, &files);
        !status.ok())
      return status;
  }
  absl::StrAppend(&script, "unset multiplot\n");
  const fs::path script_path = out.parent_path() / (out.stem().string() + ".gp");
  if (absl::Status status = WriteTextFile(script_path, script); !status.ok()) return status;
  files.script = script_path.string();
  if (absl::Status status = RunGnuplot(options.gnuplot, script_path); !status.ok()) return status;
  return files;
}

CurveTables CurveTablesOf(const std::vector<CurveInput>& curves, int max_steps) {
  const Panels panels = GroupCurves(curves);
  CurveTables tables;
  tables.exact.header = {"scale", "row", "step", "mean", "std", "n"};
  tables.exact.numeric = {false, false, true, true, true, true};
  tables.wide.header = {"method"};
  std::vector<std::pair<std::string, int64_t>> columns;  // (scale, step)
  for (const std::string& scale : panels.scales) {
    std::set<int64_t> steps;
    for (const auto& [label, curve] : panels.by_scale.at(scale)) {
      for (const auto& [step, values] : curve) steps.insert(step);
    }
    const std::vector<int64_t> all(steps.begin(), steps.end());
    const size_t shown = std::min<size_t>(all.size(), std::max(max_steps, 1));
    for (size_t k = 0; k < shown; ++k) {
      const size_t index = shown == 1 ? all.size() - 1 : k * (all.size() - 1) / (shown - 1);
      columns.emplace_back(scale, all[index]);
      tables.wide.header.push_back(absl::StrCat(scale, " @", all[index]));
    }
  }
  for (const ResultRowKey& row : panels.rows) {
    std::vector<std::string> wide = {row.label};
    for (const auto& [scale, step] : columns) {
      const auto& by_label = panels.by_scale.at(scale);
      auto curve = by_label.find(row.label);
      auto point = curve == by_label.end() ? MeanCurve::const_iterator() : curve->second.find(step);
      const bool found = curve != by_label.end() && point != curve->second.end();
      wide.push_back(found ? FormatNumber(Summarize(point->second).mean, 4) : "–");
    }
    tables.wide.rows.push_back(std::move(wide));
    for (const std::string& scale : panels.scales) {
      auto curve = panels.by_scale.at(scale).find(row.label);
      if (curve == panels.by_scale.at(scale).end()) continue;
      for (const auto& [step, values] : curve->second) {
        const Aggregate aggregate = Summarize(values);
        tables.exact.rows.push_back(
            {scale, row.label, std::to_string(step), ExactNumber(aggregate.mean),
             aggregate.n > 1 ? ExactNumber(aggregate.std) : "", std::to_string(aggregate.n)});
      }
    }
  }
  return tables;
}

absl::StatusOr<PlotFiles> WriteRungPlot(const std::vector<CurveInput>& curves,
                                        const std::vector<int64_t>& rung_steps,
                                        const PlotOptions& options) {
  const fs::path out = fs::absolute(options.out);
  if (curves.empty()) {
    return absl::NotFoundError("no search trial has values of '" + options.metric + "'");
  }
  std::vector<TrialConfig> configs;
  for (const CurveInput& curve : curves) configs.push_back(curve.config);
  const std::vector<TrialCell> cells = CellsOf(configs);
  std::vector<std::string> labels;  // a colour per row label, in first-seen order
  for (const TrialCell& cell : cells) {
    if (std::find(labels.begin(), labels.end(), cell.row.method) == labels.end())
      labels.push_back(cell.row.method);
  }
  PlotFiles files;
  files.figure = out.string();
  const fs::path data_dir = out.parent_path() / (out.stem().string() + "-data");
  std::error_code error;
  fs::create_directories(data_dir, error);
  if (error)
    return absl::UnavailableError("cannot create " + data_dir.string() + ": " + error.message());
  std::string script = absl::StrCat(
      "# Drawn by `spheret plot`; edit and run `gnuplot ", out.stem().string(), ".gp` here.\n",
      TerminalFor(out, 2), "\nset output ", Quoted(out.filename().string()), "\nset title ",
      Quoted(absl::StrCat(options.title, " (faded: ", TrialStateName(TrialState::kPruned),
                          "; dashed: rungs)")),
      "\nset xlabel ", Quoted(options.xlabel), "\nset ylabel ", Quoted(options.metric),
      "\nset key outside right\nset grid\n");
  if (!options.ylim.empty()) absl::StrAppend(&script, "set yrange [", options.ylim, "]\n");
  for (int64_t step : rung_steps) {
    absl::StrAppend(&script, "set arrow from ", step, ", graph 0 to ", step,
                    ", graph 1 nohead dashtype 2 linecolor rgb '#888888'\n");
  }
  std::vector<std::string> plots;
  std::set<std::string> titled;  // one key entry per method (and one for pruned trials)
  for (size_t i = 0; i < curves.size(); ++i) {
    absl::StatusOr<fs::path> data = WriteCurveData(curves[i], data_dir);
    if (!data.ok()) return data.status();
    files.data_files.push_back(data->string());
    const bool pruned = curves[i].state == TrialState::kPruned;
    const std::string key = pruned ? TrialStateName(TrialState::kPruned) : cells[i].row.method;
    const size_t color =
        std::find(labels.begin(), labels.end(), cells[i].row.method) - labels.begin() + 1;
    plots.push_back(absl::StrCat(Quoted((data_dir.filename() / data->filename()).string()),
                                 " using 1:2 with lines",
                                 pruned ? " linewidth 1 linecolor rgb '#d0d0d0'"
                                        : absl::StrCat(" linewidth 2 linecolor ", color),
                                 titled.insert(key).second ? " title " + Quoted(key) : " notitle"));
  }
  files.lines = static_cast<int>(plots.size());
  absl::StrAppend(&script, "plot ", absl::StrJoin(plots, ", \\\n     "), "\n");
  const fs::path script_path = out.parent_path() / (out.stem().string() + ".gp");
  if (absl::Status status = WriteTextFile(script_path, script); !status.ok()) return status;
  files.script = script_path.string();
  if (absl::Status status = RunGnuplot(options.gnuplot, script_path); !status.ok()) return status;
  return files;
}

}  // namespace spheret::client
