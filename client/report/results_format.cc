#include "client/report/results_format.h"

#include "absl/strings/match.h"

namespace spheret::client {
namespace {

const Aggregate* CellOf(const ResultTable& results, const std::string& row,
                        const std::string& scale, const std::string& metric) {
  auto by_row = results.cells.find(row);
  if (by_row == results.cells.end()) return nullptr;
  auto by_scale = by_row->second.find(scale);
  if (by_scale == by_row->second.end()) return nullptr;
  auto cell = by_scale->second.find(metric);
  return cell == by_scale->second.end() ? nullptr : &cell->second;
}

std::string CellText(const Aggregate* cell, int decimals) {
  if (cell == nullptr || cell->n == 0) return "—";
  std::string text = FormatNumber(cell->mean, decimals);
  if (cell->n > 1) text += " ± " + FormatNumber(cell->std, decimals);
  return text + " (" + std::to_string(cell->n) + ")";
}

std::string PaperText(const ResultFormatOptions& options, const std::string& scale,
                      const ResultRowKey& row, const std::string& metric) {
  std::optional<double> value =
      options.paper->Find(options.paper_dataset, scale, row.method, row.p, metric);
  return value ? FormatNumber(*value, options.decimals) : "—";
}

}  // namespace

std::string MetricLabel(const std::string& metric) {
  if (metric == "train/loss_avg") return "train loss";
  if (metric == "val/loss") return "val loss";
  if (metric == "val/ppl") return "val ppl";
  if (metric.rfind(kZeroShotPrefix, 0) == 0) {  // zeroshot/hellaswag/acc_norm: hellaswag acc_norm %
    std::string label = metric.substr(std::string(kZeroShotPrefix).size());
    const size_t slash = label.find('/');
    if (slash != std::string::npos) label[slash] = ' ';
    const bool percent = absl::EndsWith(label, " acc") || absl::EndsWith(label, " acc_norm");
    return percent ? label + " %" : label;
  }
  return metric;
}

Table PivotTable(const ResultTable& results, const ResultFormatOptions& options) {
  Table table;
  table.header.push_back("method");
  const bool several = results.metrics.size() > 1;
  for (const std::string& scale : results.scales) {
    for (const std::string& metric : results.metrics) {
      const std::string name = several ? scale + " " + MetricLabel(metric) : scale;
      table.header.push_back(name);
      if (options.paper != nullptr) table.header.push_back(name + " (paper)");
    }
  }
  for (const ResultRowKey& row : results.rows) {
    std::vector<std::string> line = {row.label};
    for (const std::string& scale : results.scales) {
      for (const std::string& metric : results.metrics) {
        line.push_back(CellText(CellOf(results, row.label, scale, metric), options.decimals));
        if (options.paper != nullptr) line.push_back(PaperText(options, scale, row, metric));
      }
    }
    table.rows.push_back(std::move(line));
  }
  return table;
}

Table LongTable(const ResultTable& results, const ResultFormatOptions& options) {
  Table table;
  table.header = {"row", "method", "p", "scale", "metric", "mean", "std", "n"};
  table.numeric = {false, false, true, false, false, true, true, true};
  if (options.paper != nullptr) {
    table.header.push_back("paper");
    table.numeric.push_back(true);
  }
  for (const ResultRowKey& row : results.rows) {
    for (const std::string& scale : results.scales) {
      for (const std::string& metric : results.metrics) {
        const Aggregate* cell = CellOf(results, row.label, scale, metric);
        if (cell == nullptr) continue;
        std::vector<std::string> line = {row.label,
                                         row.method,
                                         row.p ? ExactNumber(*row.p) : "",
                                         scale,
                                         metric,
                                         ExactNumber(cell->mean),
                                         ExactNumber(cell->std),
                                         std::to_string(cell->n)};
        if (options.paper != nullptr) {
          std::optional<double> value =
              options.paper->Find(options.paper_dataset, scale, row.method, row.p, metric);
          line.push_back(value ? ExactNumber(*value) : "");
        }
        table.rows.push_back(std::move(line));
      }
    }
  }
  return table;
}

Table MetricColumnsTable(const ResultTable& results, const ResultFormatOptions& options) {
  Table table;
  table.header = {"method", "scale"};
  for (const std::string& metric : results.metrics) {
    table.header.push_back(MetricLabel(metric));
    if (options.paper != nullptr) table.header.push_back(MetricLabel(metric) + " (paper)");
  }
  for (const ResultRowKey& row : results.rows) {
    for (const std::string& scale : results.scales) {
      std::vector<std::string> line = {row.label, scale};
      bool any = false;
      for (const std::string& metric : results.metrics) {
        const Aggregate* cell = CellOf(results, row.label, scale, metric);
        any = any || cell != nullptr;
        line.push_back(CellText(cell, options.decimals));
        if (options.paper != nullptr) line.push_back(PaperText(options, scale, row, metric));
      }
      if (any) table.rows.push_back(std::move(line));
    }
  }
  return table;
}

Table ResultsTableFor(const ResultTable& results, Format format,
                      const ResultFormatOptions& options) {
  if (format == Format::kCsv || format == Format::kJson) return LongTable(results, options);
  return PivotTable(results, options);
}

}  // namespace spheret::client
