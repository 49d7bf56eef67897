// Geometry in reports: the trainer's per-layer values (its diag events), read by field from the
// coordinator's per-layer table, over depth and summarized per trial.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/fetch.h"
#include "client/geometry_report.h"
#include "client/render/figures.h"
#include "client/render/files.h"
#include "client/report/bounds.h"
#include "client/report/geometry.h"
#include "client/report/table.h"
#include "protocol/diag_values.h"
#include "protocol/metric_catalog.h"

namespace spheret::client {
namespace {

namespace fs = std::filesystem;

// Whether every series is a whole-model one (sublayer model), drawn over training, not depth.
bool ModelLevel(const std::vector<DiagSeries>& series) {
  return std::all_of(series.begin(), series.end(), [](const DiagSeries& one) {
    return one.sublayer == protocol::kModelSublayer;
  });
}

// A whole-model field's curves over training, one per trial.
std::vector<CurveInput> TrainingCurves(std::vector<DiagSeries> series) {
  std::vector<CurveInput> curves;
  for (DiagSeries& one : series) {
    curves.push_back(
        {one.trial_id, std::move(one.config), std::move(one.steps), std::move(one.values)});
  }
  return curves;
}

// A field's axis label: the field, what its number is where it is an estimate or a bound
// (protocol/diag_values.h), and how it was reduced.
std::string AxisLabel(const std::string& field, const std::string& reduced) {
  const std::string_view reading = protocol::DiagFieldReading(field);
  std::string label = field;
  if (!reading.empty()) absl::StrAppend(&label, ": ", std::string(reading));
  if (!reduced.empty()) absl::StrAppend(&label, " (", reduced, ")");
  return label;
}

// Proposition 6's bounds beside what they bound (client/report/bounds.h): under the geometry
// table in the text formats, in geometry_bounds.csv/json at full precision; its Markdown into
// the index. Nothing when no trial logged G.
absl::Status WriteBounds(const std::map<std::string, std::vector<DiagSeries>>& by_field,
                         const fs::path& dir, const std::map<Format, std::string>& geometry,
                         std::string* index) {
  const BoundsTables tables = BoundsTablesOf(by_field);
  const Table& shown = tables.shown;
  if (shown.rows.empty()) return absl::OkStatus();
  const Table& exact = tables.exact;
  for (const auto& [format, text] : geometry) {
    const std::string heading =
        format == Format::kMarkdown ? "\n## Proposition 6's bounds beside what they bound\n\n"
        : format == Format::kLatex  ? "\n% Proposition 6's bounds beside what they bound\n"
                                    : "\nProposition 6's bounds beside what they bound\n\n";
    absl::Status status = WriteTextFile(dir / ("geometry." + FormatExtension(format)),
                                        absl::StrCat(text, heading, Render(shown, format)));
    if (!status.ok()) return status;
  }
  for (Format format : {Format::kCsv, Format::kJson}) {
    absl::Status status =
        WriteTextFile(dir / ("geometry_bounds." + FormatExtension(format)), Render(exact, format));
    if (!status.ok()) return status;
  }
  absl::StrAppend(index,
                  "Proposition 6's bounds beside what they bound (per trial; full precision in "
                  "geometry_bounds.csv and .json): exp(ΣΔ) against σ_max(G) and Π m_l against "
                  "σ_min(G), with their ratios; σ_min(G) as an interval whose lower end is 0 "
                  "unless certified:\n\n",
                  Render(shown, Format::kMarkdown), "\n");
  return absl::OkStatus();
}

// GeometryMetrics(), the Jacobian's and the gates' only where some trial recorded them.
std::vector<std::string> GeometryColumns(const std::vector<TrialResult>& trials) {
  std::vector<std::string> columns;
  for (const std::string& metric : GeometryMetrics()) {
    const bool optional =
        metric.find("jacobian") != std::string::npos || metric.find("gate_") != std::string::npos;
    if (!optional || std::any_of(trials.begin(), trials.end(), [&](const TrialResult& t) {
          return t.values.count(metric) != 0;
        })) {
      columns.push_back(metric);
    }
  }
  return columns;
}

// NotFound naming the overflow when the field has values but none is finite (a trainer's NaN or
// ±inf is stored as no number): there is nothing to draw, and "train with diag_interval > 0"
// would be the wrong advice.
absl::Status CheckSomeFinite(const std::vector<DiagSeries>& series, const std::string& field) {
  size_t values = 0;
  for (const DiagSeries& one : series) {
    if (std::any_of(one.values.begin(), one.values.end(),
                    [](double value) { return std::isfinite(value); })) {
      return absl::OkStatus();
    }
    values += one.values.size();
  }
  if (values == 0) return absl::OkStatus();
  return absl::NotFoundError(absl::StrCat("every value of '", field, "' (", values, " in ",
                                          series.size(),
                                          " series) is NaN or infinite: the trainer's numbers "
                                          "overflowed, so there is nothing to draw"));
}

}  // namespace

absl::Status CheckDiagField(const std::string& field) {
  if (protocol::IsDiagFieldName(field)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--diag must name a per-layer field (1 to 40 of a-z, 0-9, _), e.g. ",
                   absl::StrJoin(DiagFields(), ", "), "; got '", field.substr(0, 40), "'"));
}

absl::StatusOr<int> PlotDiagOverDepth(Connection& connection, const std::vector<int64_t>& sweep_ids,
                                      const DiagPlotOptions& options) {
  if (absl::Status bad = CheckDiagField(options.field); !bad.ok()) return bad;
  absl::StatusOr<std::vector<DiagSeries>> series =
      FetchLayerValues(connection, sweep_ids, options.field);
  if (!series.ok()) return series.status();
  if (absl::Status none = CheckSomeFinite(*series, options.field); !none.ok()) return none;
  const bool over_training = !series->empty() && ModelLevel(*series);
  absl::StatusOr<std::vector<CurveInput>> profiles =
      over_training ? TrainingCurves(std::move(*series)) : DepthProfiles(*series, options.stat);
  if (!profiles.ok()) return profiles.status();
  if (profiles->empty()) {
    return absl::NotFoundError("no trial has diag values of '" + options.field +
                               "' (train with diag_interval > 0; jac_* and e2e_* need "
                               "jacobian_interval > 0; b_norm, eta, delta, margin and the model "
                               "and dyadic rows a sphere method; gate_* method autonorm)");
  }
  PlotOptions plot;
  plot.metric =
      AxisLabel(options.field, over_training ? "" : absl::StrCat(options.stat, " over training"));
  plot.xlabel = over_training ? "step" : "sublayer (layer l: attn 2l-1, mlp 2l)";
  plot.out = options.out;
  plot.title = options.title;
  plot.gnuplot = options.gnuplot;
  absl::StatusOr<PlotFiles> files = WritePlot(*profiles, plot);
  if (!files.ok()) return files.status();
  return files->lines;
}

namespace {

// geometry.{txt,md,tex,csv,json} and its Markdown in `index`; returns the text formats' renderings,
// which the bounds table joins.
absl::StatusOr<std::map<Format, std::string>> WriteGeometryTable(
    const std::vector<TrialResult>& trials, const ResultFormatOptions& format_options,
    const fs::path& dir, std::string* index) {
  const ResultTable table = AggregateResults(trials, GeometryColumns(trials));
  ResultFormatOptions options = format_options;
  options.paper = nullptr;  // the paper publishes no geometry numbers
  options.decimals = 4;
  const Table text = MetricColumnsTable(table, options);
  std::map<Format, std::string> human;
  for (Format format :
       {Format::kTable, Format::kMarkdown, Format::kLatex, Format::kCsv, Format::kJson}) {
    const bool long_form = format == Format::kCsv || format == Format::kJson;
    const std::string rendered = Render(long_form ? LongTable(table, options) : text, format);
    if (!long_form) human[format] = rendered;
    absl::Status status = WriteTextFile(dir / ("geometry." + FormatExtension(format)), rendered);
    if (!status.ok()) return status;
  }
  absl::StrAppend(index,
                  "Geometry from the diag events, mean ± std (n seeds): final ‖h‖ (mean over "
                  "sublayers) and its drift (max over sublayers of max/min over training), "
                  "rotation angle θ (radians) mean and max, % at the angle cap (the share of "
                  "tokens whose θ sits at the cap; for runs without it, of diag rows whose mean θ "
                  "reached it), step size α and radial share; where recorded, Proposition 6's "
                  "S = ΣΔ and A = Σθ² (mean over the logged steps), the largest final mean token "
                  "cosine of any row (near 1: token collapse), and AutoNorm's final gate choices "
                  "(% of sublayers per norm):\n\n",
                  Render(text, Format::kMarkdown), "\n");
  return human;
}

// geometry_FIELD.{png,svg}: the field's mean over training, over depth, queued in `figures`;
// its link appended to `links`. Nothing when no trial recorded the field.
absl::Status QueueDepthFigures(const std::string& field, const std::vector<DiagSeries>& series,
                               const fs::path& dir, FigureBatch* figures, std::string* links) {
  if (series.empty()) return absl::OkStatus();
  absl::StatusOr<std::vector<CurveInput>> profiles = DepthProfiles(series, "mean");
  if (!profiles.ok()) return profiles.status();
  for (const char* extension : {".png", ".svg"}) {
    PlotOptions plot;
    plot.metric = AxisLabel(field, "mean over training");
    plot.xlabel = "sublayer (layer l: attn 2l-1, mlp 2l)";
    plot.out = (dir / ("geometry_" + field + extension)).string();
    plot.title = AxisLabel(field, "") + " over depth (mean over seeds)";
    absl::StatusOr<PlotFiles> figure = WritePlot(*profiles, plot, figures);
    if (!figure.ok()) return figure.status();
  }
  absl::StrAppend(links, "![", field, " over depth](geometry_", field, ".png)\n\n");
  return absl::OkStatus();
}

// Every diag field's series in `sweep_ids`, by field, fetched one field at a time in the order of
// DiagFields(), each field's figures queued (`links` in that order) and drawn in the background
// every kFieldsPerStart fields, so that gnuplot draws while the next fields are fetched (issue
// 47). Only hidden_norm (empty: no geometry, and nothing queued) when no trial recorded it.
absl::StatusOr<std::map<std::string, std::vector<DiagSeries>>> FetchAndQueue(
    Connection& connection, const std::vector<int64_t>& sweep_ids, const fs::path& dir,
    FigureBatch* figures, std::string* links) {
  constexpr int kFieldsPerStart = 8;
  std::map<std::string, std::vector<DiagSeries>> by_field;
  absl::StatusOr<std::vector<DiagSeries>> hidden =
      FetchLayerValues(connection, sweep_ids, protocol::kHiddenNorm);
  if (!hidden.ok()) return hidden.status();
  by_field[protocol::kHiddenNorm] = std::move(*hidden);
  if (by_field[protocol::kHiddenNorm].empty()) return by_field;
  int fields = 0;
  for (const std::string& field : DiagFields()) {
    if (!by_field.count(field)) {
      absl::StatusOr<std::vector<DiagSeries>> series =
          FetchLayerValues(connection, sweep_ids, field);
      if (!series.ok()) return series.status();
      by_field[field] = std::move(*series);
    }
    if (absl::Status status = QueueDepthFigures(field, by_field[field], dir, figures, links);
        !status.ok()) {
      return status;
    }
    if (++fields % kFieldsPerStart == 0) figures->Start();
  }
  return by_field;
}

}  // namespace

absl::StatusOr<bool> WriteGeometry(Connection& connection, const std::vector<int64_t>& sweep_ids,
                                   std::vector<TrialResult> trials,
                                   const ResultFormatOptions& format_options,
                                   const std::string& dir, FigureBatch* figures,
                                   std::string* index) {
  std::string links;  // the depth figures', after the tables in `index`
  absl::StatusOr<std::map<std::string, std::vector<DiagSeries>>> by_field =
      FetchAndQueue(connection, sweep_ids, dir, figures, &links);
  if (!by_field.ok()) return by_field.status();
  if ((*by_field)[protocol::kHiddenNorm].empty()) return false;
  AddGeometrySummaries(*by_field, &trials);
  absl::StatusOr<std::map<Format, std::string>> human =
      WriteGeometryTable(trials, format_options, dir, index);
  if (!human.ok()) return human.status();
  if (absl::Status status = WriteBounds(*by_field, dir, *human, index); !status.ok()) {
    return status;
  }
  absl::StrAppend(index, links);
  return true;
}

}  // namespace spheret::client
