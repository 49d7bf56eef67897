#include "client/report/paper_tables.h"

#include <algorithm>

#include "client/report/paper_layout.h"
#include "client/report/results.h"
#include "client/report/results_format.h"

namespace spheret::client {
namespace {

using protocol::kTrainLossAvg;
using protocol::kValLoss;
using protocol::kValPpl;

// Tables 4-5's columns in the paper's order, then our average of the ten accuracies.
std::vector<PaperColumnSpec> ZeroShotColumns() {
  return {{"zeroshot/arc_challenge/acc_norm", "ARC-C acc_n"},
          {"zeroshot/arc_easy/acc_norm", "ARC-E acc_n"},
          {"zeroshot/boolq/acc", "BoolQ acc"},
          {"zeroshot/hellaswag/acc_norm", "HellaSwag acc_n"},
          {"zeroshot/lambada_openai/acc", "LAMBADA acc"},
          {"zeroshot/openbookqa/acc_norm", "OBQA acc_n"},
          {"zeroshot/piqa/acc_norm", "PIQA acc_n"},
          {"zeroshot/sciq/acc", "SciQ acc"},
          {"zeroshot/social_iqa/acc", "SocialIQa acc"},
          {"zeroshot/winogrande/acc", "WinoGrande acc"},
          {"zeroshot/lambada_openai/perplexity", "LAMBADA ppl"},
          {"zeroshot/wikitext/word_perplexity", "WikiText ppl"},
          {kAverageAccuracy, "Avg. acc", "", PaperReading::kMeanOfAccuracies,
           "Avg. acc (it needs all ten accuracies)", " (ours)"}};
}

// Figures 2-3: the train and the val loss curves, each its own files (FIGURE_STEM_loss.*).
std::vector<PaperColumnSpec> LossCurves() { return {{kTrainLossAvg, "train"}, {kValLoss, "val"}}; }

bool IsZeroShot(const std::string& metric) { return metric.rfind(kZeroShotPrefix, 0) == 0; }

}  // namespace

const std::vector<PaperOutputSpec>& PaperOutputSpecs() {
  static const std::vector<PaperOutputSpec> kSpecs = {
      {PaperOutput::kTable2,
       "table2",
       "",
       "Table 2: train and validation loss",
       PaperLayout::kByCorpusAndScale,
       3,
       {
           {kTrainLossAvg, "train", "train_loss"},
           {kValLoss, "val", "val_loss"},
       }},
      {PaperOutput::kTable3,
       "table3",
       "",
       "Table 3: validation perplexity",
       PaperLayout::kByCorpus,
       2,
       {
           {kValPpl, "ppl", "val_ppl", PaperReading::kElseExpValLoss},
       }},
      {PaperOutput::kTable4, "table4", kFineWebEdu, "Table 4", PaperLayout::kZeroShot, 2,
       ZeroShotColumns()},
      {PaperOutput::kTable5, "table5", kOpenWebText, "Table 5", PaperLayout::kZeroShot, 2,
       ZeroShotColumns()},
      {PaperOutput::kFigure2, "figure2", kFineWebEdu, "", PaperLayout::kFigure, 0, LossCurves()},
      {PaperOutput::kFigure3, "figure3", kOpenWebText, "", PaperLayout::kFigure, 0, LossCurves()},
  };
  return kSpecs;
}

const PaperOutputSpec& PaperOutputSpecOf(PaperOutput output) {
  const std::vector<PaperOutputSpec>& specs = PaperOutputSpecs();
  return *std::find_if(specs.begin(), specs.end(),
                       [&](const PaperOutputSpec& spec) { return spec.output == output; });
}

std::vector<std::string> PaperFetchMetrics(const std::vector<PaperOutputSpec>& specs) {
  std::vector<std::string> metrics;
  const auto add = [&](const std::string& metric) {
    if (std::find(metrics.begin(), metrics.end(), metric) == metrics.end()) {
      metrics.push_back(metric);
    }
  };
  for (const PaperOutputSpec& spec : specs) {
    if (spec.layout == PaperLayout::kFigure) continue;  // curves, fetched as such
    for (const PaperColumnSpec& column : spec.columns) {
      if (column.reading == PaperReading::kMeanOfAccuracies || IsZeroShot(column.metric)) continue;
      add(column.metric);
      if (column.reading == PaperReading::kElseExpValLoss) add(kValLoss);
    }
  }
  return metrics;
}

protocol::Direction PaperDirection(const PaperColumnSpec& column) {
  if (const protocol::MetricInfo* info = protocol::FindMetric(column.metric)) {
    return info->direction;
  }
  return HigherIsBetter(column.metric) ? protocol::Direction::kHigher : protocol::Direction::kLower;
}

std::string DirectionArrow(protocol::Direction direction) {
  switch (direction) {
    case protocol::Direction::kHigher:
      return "↑";
    case protocol::Direction::kLower:
      return "↓";
    default:
      return "";
  }
}

std::string PaperWhat(const PaperColumnSpec& column) {
  if (!column.what.empty()) return column.what;
  if (protocol::FindMetric(column.metric) != nullptr) {
    return std::string(protocol::MetricLabel(column.metric));
  }
  return column.heading;
}

std::string PaperMetricName(const std::string& metric) {
  for (const PaperOutputSpec& spec : PaperOutputSpecs()) {
    for (const PaperColumnSpec& column : spec.columns) {
      if (column.metric == metric && !column.paper.empty()) return column.paper;
    }
  }
  return IsZeroShot(metric) ? metric.substr(std::string(kZeroShotPrefix).size()) : metric;
}

}  // namespace spheret::client
