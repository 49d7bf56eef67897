// The paper layout's outputs by name, and its tables as text (md, tex, txt) and long rows (csv,
// json).
#include <optional>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/report/paper_layout.h"
#include "client/report/results_format.h"

namespace spheret::client {
namespace {

int DecimalsOf(const PaperTableData& data, const PaperTableOptions& options) {
  return options.decimals > 0 ? options.decimals : data.decimals;
}

// The confounds of a column as one CSV/JSON field ("" when none).
std::string ColumnConfounds(const PaperTableData& data, const std::string& column) {
  auto found = data.column_confounds.find(column);
  return found == data.column_confounds.end() ? "" : ConfoundField(found->second);
}

}  // namespace

absl::StatusOr<PaperOutput> ParsePaperOutput(const std::string& name) {
  std::vector<std::string> names;
  for (const PaperOutputSpec& spec : PaperOutputSpecs()) {
    if (name == spec.name) return spec.output;
    names.push_back(spec.name);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--paper: '", name, "' is not one of ", absl::StrJoin(names, ", ")));
}

std::string PaperOutputName(PaperOutput output) { return PaperOutputSpecOf(output).name; }

bool IsPaperFigure(PaperOutput output) {
  return PaperOutputSpecOf(output).layout == PaperLayout::kFigure;
}

std::string PaperOutputCorpus(PaperOutput output) { return PaperOutputSpecOf(output).corpus; }

Table PaperTableText(const PaperTableData& data, const PaperTableOptions& options) {
  const int decimals = DecimalsOf(data, options);
  Table table;
  table.header = data.header;
  const size_t width = data.header.size() - 1;
  for (size_t r = 0; r < data.rows.size(); ++r) {
    std::vector<std::string> line = {data.rows[r]};
    for (size_t c = 0; c < width; ++c) {
      const PaperCell& cell = data.cells[r * width + c];
      std::string text = "–";
      if (cell.stats.n > 0) {
        text = FormatNumber(cell.stats.mean, decimals);
        if (cell.stats.n > 1) {
          absl::StrAppend(&text, " ± ", FormatNumber(cell.stats.std, decimals), " [",
                          FormatNumber(cell.stats.ci_low, decimals), ", ",
                          FormatNumber(cell.stats.ci_high, decimals), "]");
        }
      }
      if (cell.stats.n > 0 || !cell.seeds.lost.empty()) {
        absl::StrAppend(&text, " ", SeedCountText(cell.seeds));
      }
      if (options.paper != nullptr) {
        absl::StrAppend(&text, " [paper ",
                        cell.paper ? FormatNumber(*cell.paper, decimals) : std::string("–"), "]");
      }
      line.push_back(text);
    }
    table.rows.push_back(std::move(line));
  }
  for (size_t c = 0; c < width; ++c) {
    std::vector<std::optional<double>> means;
    for (size_t r = 0; r < data.rows.size(); ++r) {
      const PaperCell& cell = data.cells[r * width + c];
      means.push_back(cell.stats.n > 0 ? std::optional<double>(cell.stats.mean) : std::nullopt);
    }
    if (data.directions[c] == protocol::Direction::kNone) continue;  // nothing is best
    const ColumnRanks ranks =
        RankColumn(means, data.directions[c] == protocol::Direction::kHigher, decimals);
    for (size_t r : ranks.best) table.best.insert({r, c + 1});
    for (size_t r : ranks.second) table.second.insert({r, c + 1});
  }
  std::set<std::pair<size_t, size_t>> lossy;
  for (size_t i = 0; i < data.cells.size(); ++i) {
    if (!data.cells[i].seeds.lost.empty()) lossy.insert({i / width, i % width + 1});
  }
  table.notes = data.notes;
  if (DaggerLossyMarks(lossy, &table)) table.notes.push_back(kDaggerNote);
  table.groups = data.groups;
  if (!data.groups.empty()) table.grouped_header = data.short_header;
  return table;
}

Table PaperTableLong(const PaperTableData& data) {
  Table table;
  table.header = {"row",   "corpus",  "scale",    "metric",    "n",
                  "mean",  "std",     "ci95_low", "ci95_high", "trials",
                  "paper", "missing", "n_total",  "left_out",  "confounds"};
  table.numeric = {false, false, false, false, true, true,  true, true,
                   true,  false, true,  false, true, false, false};
  for (const PaperCell& cell : data.cells) {
    table.rows.push_back({cell.row, cell.corpus, cell.scale, cell.metric,
                          std::to_string(cell.stats.n), ExactNumber(cell.stats.mean),
                          ExactNumber(cell.stats.std), ExactNumber(cell.stats.ci_low),
                          ExactNumber(cell.stats.ci_high), absl::StrJoin(cell.trial_ids, " "),
                          cell.paper ? ExactNumber(*cell.paper) : "", cell.missing,
                          std::to_string(cell.seeds.total()), LostSeedsText(cell.seeds),
                          ColumnConfounds(data, cell.corpus + " " + cell.scale)});
  }
  return table;
}

}  // namespace spheret::client
