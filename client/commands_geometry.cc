// Geometry in reports: the trainer's per-layer diag values, stored by the coordinator as metrics
// diag/FIELD/LAYER/SUBLAYER, over depth and summarized per trial.
#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/fetch.h"
#include "client/geometry_report.h"
#include "client/report/files.h"
#include "client/report/geometry.h"
#include "client/report/plot.h"
#include "client/report/table.h"
#include "config/scale_presets.h"
#include "config/train_config.h"
#include "protocol/trainer_events.h"

namespace spheret::client {
namespace {

namespace fs = std::filesystem;

// The deepest model among the sweeps' trials (diag layers run 1..n_layer x loops).
absl::StatusOr<int64_t> MaxLayers(Connection& connection, const std::vector<int64_t>& sweep_ids) {
  absl::StatusOr<std::vector<TrialResult>> trials =
      FetchResults(connection, sweep_ids, {protocol::kValLoss});
  if (!trials.ok()) return trials.status();
  int64_t layers = 0;
  for (const TrialResult& trial : *trials) {
    const nlohmann::json config =
        nlohmann::json::parse(trial.config_json, nullptr, /*allow_exceptions=*/false);
    if (!config.is_object()) continue;
    // The explicit n_layer, else the scale preset's, else the trainer's default.
    std::optional<ScalePreset> preset = FindScalePreset(config.value("scale", std::string()));
    const int64_t preset_layers = preset ? preset->n_layer : TrainConfig{}.n_layer;
    const int64_t loops = config.value("loops", TrainConfig{}.loops);
    layers = std::max<int64_t>(layers, config.value("n_layer", preset_layers) * loops);
  }
  return std::min<int64_t>(layers, 1024);
}

absl::StatusOr<std::vector<DiagSeries>> FetchDiag(Connection& connection,
                                                  const std::vector<int64_t>& sweep_ids,
                                                  const std::string& field, int64_t layers) {
  std::vector<DiagSeries> series;
  for (int64_t layer = 1; layer <= layers; ++layer) {
    int64_t found = 0;
    for (const char* sublayer : {"attn", "mlp"}) {
      absl::StatusOr<std::vector<CurveInput>> curves =
          FetchCurves(connection, sweep_ids, protocol::DiagMetricName(field, layer, sublayer));
      if (!curves.ok()) return curves.status();
      for (CurveInput& curve : *curves) {
        series.push_back({curve.trial_id, std::move(curve.config_json), layer, sublayer,
                          std::move(curve.steps), std::move(curve.values)});
        ++found;
      }
    }
    if (found == 0) break;  // past the deepest layer of every trial (or no trial has the field)
  }
  return series;
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

}  // namespace

absl::StatusOr<int> PlotDiagOverDepth(Connection& connection, const std::vector<int64_t>& sweep_ids,
                                      const DiagPlotOptions& options) {
  const std::vector<std::string>& fields = DiagFields();
  if (std::find(fields.begin(), fields.end(), options.field) == fields.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--diag must be one of ", absl::StrJoin(fields, ", "), ", got '", options.field, "'"));
  }
  absl::StatusOr<int64_t> layers = MaxLayers(connection, sweep_ids);
  if (!layers.ok()) return layers.status();
  absl::StatusOr<std::vector<DiagSeries>> series =
      FetchDiag(connection, sweep_ids, options.field, *layers);
  if (!series.ok()) return series.status();
  absl::StatusOr<std::vector<CurveInput>> profiles = DepthProfiles(*series, options.stat);
  if (!profiles.ok()) return profiles.status();
  if (profiles->empty()) {
    return absl::NotFoundError("no trial has diag values of '" + options.field +
                               "' (train with diag_interval > 0; jacobian_* and update_radial "
                               "need jacobian_interval > 0, gate_* method autonorm)");
  }
  PlotOptions plot;
  plot.metric = absl::StrCat(options.field, " (", options.stat, " over training)");
  plot.xlabel = "sublayer (layer l: attn 2l-1, mlp 2l)";
  plot.out = options.out;
  plot.title = options.title;
  plot.gnuplot = options.gnuplot;
  absl::StatusOr<PlotFiles> files = WritePlot(*profiles, plot);
  if (!files.ok()) return files.status();
  return files->lines;
}

absl::StatusOr<bool> WriteGeometry(Connection& connection, const std::vector<int64_t>& sweep_ids,
                                   std::vector<TrialResult> trials,
                                   const ResultFormatOptions& format_options,
                                   const std::string& dir, const std::string& gnuplot,
                                   std::string* index) {
  absl::StatusOr<int64_t> layers = MaxLayers(connection, sweep_ids);
  if (!layers.ok()) return layers.status();
  std::map<std::string, std::vector<DiagSeries>> by_field;
  for (const std::string& field : DiagFields()) {
    absl::StatusOr<std::vector<DiagSeries>> series =
        FetchDiag(connection, sweep_ids, field, *layers);
    if (!series.ok()) return series.status();
    by_field[field] = std::move(*series);
  }
  if (by_field["hidden_norm"].empty()) return false;
  AddGeometrySummaries(by_field, &trials);
  const ResultTable table = AggregateResults(trials, GeometryColumns(trials));
  ResultFormatOptions options = format_options;
  options.paper = nullptr;  // the paper publishes no geometry numbers
  options.decimals = 4;
  const Table text = MetricColumnsTable(table, options);
  for (Format format :
       {Format::kTable, Format::kMarkdown, Format::kLatex, Format::kCsv, Format::kJson}) {
    const bool long_form = format == Format::kCsv || format == Format::kJson;
    absl::Status status =
        WriteTextFile(fs::path(dir) / ("geometry." + FormatExtension(format)),
                      Render(long_form ? LongTable(table, options) : text, format));
    if (!status.ok()) return status;
  }
  absl::StrAppend(index,
                  "Geometry from the diag events, mean ± std (n seeds): final ‖h‖ (mean over "
                  "sublayers) and its drift (max over sublayers of max/min over training), "
                  "rotation angle θ (radians) mean and max, % of diag rows at the angle cap, step "
                  "size α and radial share; where recorded, the block Jacobian's condition number "
                  "κ(J) and its tangent-space κ_T(J) (mean over blocks and steps), and AutoNorm's "
                  "final gate choices (% of sublayers per norm):\n\n",
                  Render(text, Format::kMarkdown), "\n");
  for (const std::string& field : DiagFields()) {
    if (by_field[field].empty()) continue;
    absl::StatusOr<std::vector<CurveInput>> profiles = DepthProfiles(by_field[field], "mean");
    if (!profiles.ok()) return profiles.status();
    for (const char* extension : {".png", ".svg"}) {
      PlotOptions plot;
      plot.metric = field + " (mean over training)";
      plot.xlabel = "sublayer (layer l: attn 2l-1, mlp 2l)";
      plot.out = (fs::path(dir) / ("geometry_" + field + extension)).string();
      plot.title = field + " over depth (mean over seeds)";
      plot.gnuplot = gnuplot;
      absl::StatusOr<PlotFiles> figure = WritePlot(*profiles, plot);
      if (!figure.ok()) return figure.status();
    }
    absl::StrAppend(index, "![", field, " over depth](geometry_", field, ".png)\n\n");
  }
  return true;
}

}  // namespace spheret::client
