// The rows and columns of the paper's tables (paper_layout.cc places trials in them). Internal
// to client/report.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "client/report/paper_layout.h"

namespace spheret::client::paper {

// The paper's rows: method ids (p for p_spheret), in its order, with its names (the method
// registry's paper rows, config/method_registry.h).
struct PaperRow {
  std::string method;
  std::optional<double> p;
  std::string name;
};

const std::vector<PaperRow>& PaperRows();

// A zero-shot column: its metric, header label and name in notes.
struct PaperColumn {
  std::string metric;
  std::string label;
  std::string what;
};

// Tables 4-5's columns in the paper's order, then our average.
const std::vector<PaperColumn>& ZeroShotColumns();
constexpr size_t kAccuracyColumns = 10;  // the first ten zero-shot columns are accuracies

// The paper's row of a trial's config: proj_spheret and cay_spheret are p_spheret at p = 1, 2.
std::optional<std::string> RowOf(const TrialConfig& config);

// A column's names: in the one-row header (md, txt), under its groups (LaTeX), in notes.
struct ColumnLabel {
  std::string full;
  std::string short_label;
  std::string what;
};

// The trials of the table, placed: row name, corpus, scale.
struct Placed {
  const PaperTrial* trial;
  std::string row;
  std::string scale;
  int64_t seed;
};

// The columns of a table: corpus x scale x metric for Tables 2-3, the zero-shot columns at one
// corpus and scale for Tables 4-5.
std::vector<PaperCell> Columns(PaperOutput output, const std::vector<Placed>& placed,
                               std::vector<ColumnLabel>* labels);
// The LaTeX header's groups above the short labels: corpus, then scale (Table 2), or corpus
// (Table 3); none for Tables 4-5.
std::vector<std::vector<std::pair<std::string, size_t>>> GroupsOf(
    PaperOutput output, const std::vector<PaperCell>& columns);
std::string TitleOf(PaperOutput output, const std::vector<PaperCell>& columns);

}  // namespace spheret::client::paper
