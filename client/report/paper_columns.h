// The rows and columns of the paper's tables (paper_layout.cc places trials in them). Internal
// to client/report.
#pragma once

#include <cstdint>
#include <map>
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

// The paper's row of a trial's config: proj_spheret and cay_spheret are p_spheret at p = 1, 2.
std::optional<std::string> RowOf(const TrialConfig& config);

// A column's names: in the one-row header (md, txt), under its groups (LaTeX), in notes; and its
// declaration.
struct ColumnLabel {
  std::string full;
  std::string short_label;
  std::string what;
  const PaperColumnSpec* spec = nullptr;
};

// The trials of the table, placed: row name, corpus, scale.
struct Placed {
  const PaperTrial* trial;
  std::string row;
  std::string scale;
  int64_t seed;
};

// Whether the trial has any zero-shot score.
bool HasZeroShot(const TrialResult& trial);

// The trials an output reads: all for Tables 2-3; its corpus's for Figures 2-3; for Tables 4-5
// those of its corpus that were or are to be evaluated (every trial of the corpus when none was:
// its note then says so).
std::vector<const PaperTrial*> TrialsFor(const PaperOutputSpec& spec,
                                         const std::vector<PaperTrial>& trials);
// Places each trial in its row; trials of other methods are left out (said in `left_out`). Two
// SUCCEEDED trials of one cell and seed count once when they trained the same model, else they
// are an error naming both.
absl::StatusOr<std::vector<Placed>> Place(const std::vector<const PaperTrial*>& trials,
                                          std::vector<std::string>* left_out);
// The seeds of a cell's trials that `counted` leaves out. Where no seed has the value and every
// trial finished, nothing is lost (the "–" note says what the row lacks).
SeedAccount AccountCell(const std::vector<const Placed*>& in_cell,
                        const std::vector<int64_t>& counted);
// The confounds of the placed trials' rows, over every column (`column` of a trial: its corpus
// and scale, or its scale alone), and by column.
std::vector<Confound> PlacedConfounds(const std::vector<Placed>& placed, bool with_corpus,
                                      std::map<std::string, std::vector<Confound>>* by_column);

// The columns of a table: corpus x scale x declared column for Tables 2-3, the declared columns at
// one corpus and scale for Tables 4-5.
std::vector<PaperCell> Columns(const PaperOutputSpec& spec, const std::vector<Placed>& placed,
                               std::vector<ColumnLabel>* labels);
// The LaTeX header's groups above the short labels: corpus, then scale (Table 2), or corpus
// (Table 3); none for Tables 4-5.
std::vector<std::vector<std::pair<std::string, size_t>>> GroupsOf(
    const PaperOutputSpec& spec, const std::vector<PaperCell>& columns);
std::string TitleOf(const PaperOutputSpec& spec, const std::vector<PaperCell>& columns);

}  // namespace spheret::client::paper
