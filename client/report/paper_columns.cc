#include "client/report/paper_columns.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "config/method_registry.h"

namespace spheret::client::paper {
namespace {

// Preset order (xs, s-cpu, d12-cpu, S, M, L); the paper's S, M and L whenever one is present.
std::vector<std::string> ScalesOf(const std::vector<Placed>& placed) {
  std::vector<std::string> scales;
  for (const Placed& p : placed) {
    if (std::find(scales.begin(), scales.end(), p.scale) == scales.end()) scales.push_back(p.scale);
  }
  const bool paper = std::any_of(scales.begin(), scales.end(), [](const std::string& s) {
    return s == "S" || s == "M" || s == "L";
  });
  if (paper) {
    for (const char* s : {"S", "M", "L"}) {
      if (std::find(scales.begin(), scales.end(), s) == scales.end()) scales.push_back(s);
    }
  }
  SortScales(&scales);
  return scales;
}

// The paper's corpora first (always both), then any other, by name.
std::vector<std::string> CorporaOf(const std::vector<Placed>& placed) {
  std::vector<std::string> corpora = {kFineWebEdu, kOpenWebText};
  std::set<std::string> others;
  for (const Placed& p : placed) {
    if (p.trial->corpus != kFineWebEdu && p.trial->corpus != kOpenWebText) {
      others.insert(p.trial->corpus);
    }
  }
  corpora.insert(corpora.end(), others.begin(), others.end());
  return corpora;
}

// Tables 4-5 show the L models (a "–" where L is missing); where the corpus's trials are all at
// other than the paper's scales (the CPU twins), the largest scale they have.
std::string ZeroShotScale(const std::vector<Placed>& placed, const std::string& corpus) {
  std::vector<std::string> scales;
  for (const Placed& p : placed) {
    if (p.trial->corpus == corpus) scales.push_back(p.scale);
  }
  const bool paper = std::any_of(scales.begin(), scales.end(), [](const std::string& s) {
    return s == "S" || s == "M" || s == "L";
  });
  if (scales.empty() || paper) return "L";
  SortScales(&scales);
  return scales.back();
}

}  // namespace

const std::vector<PaperRow>& PaperRows() {
  static const std::vector<PaperRow> rows = [] {
    std::vector<PaperRow> in_order;
    for (const MethodSpec& spec : MethodRegistry()) {
      for (const PaperRowSpec& row : spec.paper_rows) {
        in_order.push_back({std::string(spec.id), row.p, std::string(row.name)});
      }
    }
    return in_order;
  }();
  return rows;
}

const std::vector<PaperColumn>& ZeroShotColumns() {
  static const std::vector<PaperColumn> columns = {
      {"zeroshot/arc_challenge/acc_norm", "ARC-C acc_n ↑", "ARC-C acc_n"},
      {"zeroshot/arc_easy/acc_norm", "ARC-E acc_n ↑", "ARC-E acc_n"},
      {"zeroshot/boolq/acc", "BoolQ acc ↑", "BoolQ acc"},
      {"zeroshot/hellaswag/acc_norm", "HellaSwag acc_n ↑", "HellaSwag acc_n"},
      {"zeroshot/lambada_openai/acc", "LAMBADA acc ↑", "LAMBADA acc"},
      {"zeroshot/openbookqa/acc_norm", "OBQA acc_n ↑", "OBQA acc_n"},
      {"zeroshot/piqa/acc_norm", "PIQA acc_n ↑", "PIQA acc_n"},
      {"zeroshot/sciq/acc", "SciQ acc ↑", "SciQ acc"},
      {"zeroshot/social_iqa/acc", "SocialIQa acc ↑", "SocialIQa acc"},
      {"zeroshot/winogrande/acc", "WinoGrande acc ↑", "WinoGrande acc"},
      {"zeroshot/lambada_openai/perplexity", "LAMBADA ppl ↓", "LAMBADA ppl"},
      {"zeroshot/wikitext/word_perplexity", "WikiText ppl ↓", "WikiText ppl"},
      {kAverageAccuracy, "Avg. acc ↑ (ours)", "Avg. acc (it needs all ten accuracies)"}};
  return columns;
}

std::optional<std::string> RowOf(const TrialConfig& config) {
  const MethodSpec* spec = FindMethodSpec(config.KnobText("method"));
  if (spec == nullptr) return std::nullopt;
  std::optional<double> p;
  std::string id(spec->id);
  if (spec->as_p_spheret) {  // proj_spheret and cay_spheret stand for p_spheret at p = 1, 2
    p = spec->as_p_spheret;
    id = MethodId(Method::kPSpheret);
  } else if (MethodReads(id, "p")) {
    const nlohmann::json* value = config.Find("p");
    p = value != nullptr && value->is_number() ? value->get<double>() : 1.0;
  }
  for (const PaperRow& row : PaperRows()) {
    if (id == row.method && row.p == p) return row.name;
  }
  return std::nullopt;
}

std::vector<PaperCell> Columns(PaperOutput output, const std::vector<Placed>& placed,
                               std::vector<ColumnLabel>* labels) {
  std::vector<PaperCell> columns;
  const auto add = [&](const std::string& corpus, const std::string& scale,
                       const std::string& metric, ColumnLabel label) {
    PaperCell column;
    column.corpus = corpus;
    column.scale = scale;
    column.metric = metric;
    columns.push_back(column);
    labels->push_back(std::move(label));
  };
  if (output == PaperOutput::kTable2 || output == PaperOutput::kTable3) {
    for (const std::string& corpus : CorporaOf(placed)) {
      for (const std::string& scale : ScalesOf(placed)) {
        const std::string at = corpus + " " + scale;
        if (output == PaperOutput::kTable2) {
          add(corpus, scale, "train/loss_avg", {at + " train ↓", "train ↓", "train loss"});
          add(corpus, scale, "val/loss", {at + " val ↓", "val ↓", "val loss"});
        } else {
          add(corpus, scale, "val/ppl", {at + " ppl ↓", scale + " ↓", "val ppl"});
        }
      }
    }
    return columns;
  }
  const std::string corpus = PaperOutputCorpus(output);
  const std::string scale = ZeroShotScale(placed, corpus);
  for (const PaperColumn& column : ZeroShotColumns()) {
    add(corpus, scale, column.metric, {column.label, column.label, column.what});
  }
  return columns;
}

std::vector<std::vector<std::pair<std::string, size_t>>> GroupsOf(
    PaperOutput output, const std::vector<PaperCell>& columns) {
  if (output != PaperOutput::kTable2 && output != PaperOutput::kTable3) return {};
  std::vector<std::pair<std::string, size_t>> corpora, scales;
  const auto extend = [](std::vector<std::pair<std::string, size_t>>* row, const std::string& s) {
    if (row->empty() || row->back().first != s) row->emplace_back(s, 0);
    ++row->back().second;
  };
  for (const PaperCell& column : columns) {
    extend(&corpora, column.corpus);
    extend(&scales, column.corpus + "\x1f" + column.scale);
  }
  for (auto& [label, span] : scales) label = label.substr(label.find('\x1f') + 1);
  if (output == PaperOutput::kTable3) return {corpora};
  return {corpora, scales};
}

std::string TitleOf(PaperOutput output, const std::vector<PaperCell>& columns) {
  switch (output) {
    case PaperOutput::kTable2:
      return "Table 2: train and validation loss";
    case PaperOutput::kTable3:
      return "Table 3: validation perplexity";
    default:
      return absl::StrCat(output == PaperOutput::kTable4 ? "Table 4" : "Table 5",
                          ": zero-shot results of the ", columns.front().scale,
                          " models trained on ", columns.front().corpus);
  }
}

}  // namespace spheret::client::paper
