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

// The non-empty words, apart by spaces: "FineWeb-Edu S train ↓", "ARC-C acc_n ↑".
std::string Words(const std::vector<std::string>& words) {
  std::string text;
  for (const std::string& word : words) {
    if (word.empty()) continue;
    if (!text.empty()) text += " ";
    text += word;
  }
  return text;
}

std::string Arrow(const PaperColumnSpec& column) { return DirectionArrow(PaperDirection(column)); }

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

std::vector<PaperCell> Columns(const PaperOutputSpec& spec, const std::vector<Placed>& placed,
                               std::vector<ColumnLabel>* labels) {
  std::vector<PaperCell> columns;
  const auto add = [&](const std::string& corpus, const std::string& scale,
                       const PaperColumnSpec& column, std::string full, std::string short_label) {
    PaperCell cell;
    cell.corpus = corpus;
    cell.scale = scale;
    cell.metric = column.metric;
    columns.push_back(cell);
    labels->push_back({std::move(full), std::move(short_label), PaperWhat(column), &column});
  };
  if (spec.layout == PaperLayout::kZeroShot) {
    const std::string scale = ZeroShotScale(placed, spec.corpus);
    for (const PaperColumnSpec& column : spec.columns) {
      const std::string label = Words({column.heading, Arrow(column)}) + column.after;
      add(spec.corpus, scale, column, label, label);
    }
    return columns;
  }
  // Under its groups (LaTeX) a column is headed by what the groups leave out: the declared
  // heading below a scale group, else the scale (and the heading, when there are several).
  const bool scale_grouped = spec.layout == PaperLayout::kByCorpusAndScale;
  for (const std::string& corpus : CorporaOf(placed)) {
    for (const std::string& scale : ScalesOf(placed)) {
      for (const PaperColumnSpec& column : spec.columns) {
        const std::string heading = Words({column.heading, Arrow(column)});
        const std::string short_label = scale_grouped             ? heading
                                        : spec.columns.size() > 1 ? Words({scale, heading})
                                                                  : Words({scale, Arrow(column)});
        add(corpus, scale, column, Words({corpus, scale, heading}) + column.after,
            short_label + column.after);
      }
    }
  }
  return columns;
}

std::vector<std::vector<std::pair<std::string, size_t>>> GroupsOf(
    const PaperOutputSpec& spec, const std::vector<PaperCell>& columns) {
  if (spec.layout != PaperLayout::kByCorpusAndScale && spec.layout != PaperLayout::kByCorpus) {
    return {};
  }
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
  if (spec.layout == PaperLayout::kByCorpus) return {corpora};
  return {corpora, scales};
}

std::string TitleOf(const PaperOutputSpec& spec, const std::vector<PaperCell>& columns) {
  if (spec.layout != PaperLayout::kZeroShot) return spec.title;
  return absl::StrCat(spec.title, ": zero-shot results of the ", columns.front().scale,
                      " models trained on ", columns.front().corpus);
}

}  // namespace spheret::client::paper
