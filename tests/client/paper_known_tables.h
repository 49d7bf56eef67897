// What `spheret report --paper table2..table5` must print for the known database
// (paper_known_values.h): the columns in the paper's order, every cell's statistics over the
// SUCCEEDED seeds, its trials, and the note each "–" cell must carry.
#pragma once

#include <algorithm>
#include <functional>

#include "tests/client/paper_known_values.h"

namespace spheret::known {

struct ExpectedColumn {
  std::string header;  // in the Markdown header
  int corpus = 0;
  int scale = 0;
  std::string metric;  // in the CSV's metric column
  bool higher = false;
  int zero_shot = -1;  // index into kZeroShot; kAccuracies + 2 for the average
};

struct ExpectedCell {
  Stats stats;
  std::vector<int64_t> trials;  // sorted
  std::string missing;          // the note of a "–" cell
  // The seeds it left out: a FAILED one (crashed after step 10), or a SUCCEEDED one without the
  // value where another seed has it. `count` replaces "(n)" ("(2 of 3; 1 failed after step
  // 10)"); `left_out` is the CSV field ("seed 3 (trial 9) failed after step 10; ...").
  int n_total = 0;
  std::string count;
  std::string left_out;
  bool lossy() const { return !left_out.empty(); }
};

struct ExpectedTable {
  std::vector<ExpectedColumn> columns;
  int decimals = 3;
  std::vector<ExpectedCell> cells;  // kRows x columns, row-major
  std::vector<std::string> notes;   // the "–" notes, each once
};

inline constexpr int kAverage = 12;

// A cell as printed: CellText with the seed count in place of "(n)", "–" (with the count when it
// left seeds out), and a dagger after a marked cell that left seeds out.
inline std::string ShownText(const ExpectedCell& cell, int decimals, bool marked) {
  std::string text = CellText(cell.stats, decimals);
  if (cell.stats.n > 0) {
    text = text.substr(0, text.rfind(" (")) + " " + cell.count;
  } else if (cell.lossy()) {
    text += " " + cell.count;
  }
  return marked && cell.lossy() ? text + " †" : text;
}  // ExpectedColumn::zero_shot of "Avg. acc"

// A trial's value in a column, or none (FAILED trials are never asked).
inline std::optional<double> ValueOf(const Trial& t, const ExpectedColumn& column) {
  if (column.metric == "train/loss_avg") return FinalLoss(t, false);
  if (column.metric == "val/loss") return FinalLoss(t, true);
  if (column.metric == "val/ppl") return std::exp(FinalLoss(t, true));
  if (column.zero_shot == kAverage) {
    double sum = 0;
    for (int j = 0; j < kAccuracies; ++j) {
      if (!Reports(t, j)) return std::nullopt;
      sum += ZeroShotShown(t, j);
    }
    return sum / kAccuracies;
  }
  if (!Reports(t, column.zero_shot)) return std::nullopt;
  return ZeroShotShown(t, column.zero_shot);
}

// The note of an empty cell: every trial FAILED, or (zero-shot) none scored. "" when the known
// database should not leave the cell empty (the test then fails on the cell).
inline std::string MissingNote(const std::vector<Trial>& cell, const ExpectedColumn& column) {
  const bool failed =
      std::all_of(cell.begin(), cell.end(), [](const Trial& t) { return Failed(t); });
  const bool unscored =
      std::none_of(cell.begin(), cell.end(), [](const Trial& t) { return Scored(t); });
  if (cell.empty() || (!failed && !(column.zero_shot >= 0 && unscored))) return "";
  std::string note = "– " + kRows[cell.front().row].name + " at " + kCorpora[column.corpus] + " " +
                     kScales[column.scale] + ": ";
  for (size_t i = 0; i < cell.size(); ++i) {
    note += (i ? "; " : "") + std::string("trial ") + std::to_string(cell[i].id) +
            (failed ? " is FAILED" : " has no zero-shot scores");
  }
  return note;
}

// The count of a cell and its left-out seeds, written out here from the known database.
inline void SeedCount(size_t counted, const std::vector<const Trial*>& failed,
                      const std::vector<const Trial*>& unscored, ExpectedCell* cell) {
  cell->n_total = static_cast<int>(counted + failed.size() + unscored.size());
  if (failed.empty() && unscored.empty()) {
    cell->count = "(" + std::to_string(counted) + ")";
    return;
  }
  std::vector<std::string> groups;
  if (!failed.empty()) groups.push_back(std::to_string(failed.size()) + " failed after step 10");
  if (!unscored.empty()) groups.push_back(std::to_string(unscored.size()) + " without a value");
  cell->count = "(" + std::to_string(counted) + " of " + std::to_string(cell->n_total) + "; " +
                groups[0] + (groups.size() > 1 ? ", " + groups[1] : "") + ")";
  std::vector<std::pair<int, std::string>> by_seed;  // config seed = Trial::seed + 1
  for (const Trial* t : failed)
    by_seed.push_back({t->seed + 1, std::to_string(t->id) + ") failed after step 10"});
  for (const Trial* t : unscored)
    by_seed.push_back({t->seed + 1, std::to_string(t->id) + ") without a value"});
  std::sort(by_seed.begin(), by_seed.end());
  for (const auto& [seed, text] : by_seed) {
    cell->left_out += (cell->left_out.empty() ? "" : "; ") + std::string("seed ") +
                      std::to_string(seed) + " (trial " + text;
  }
}

inline ExpectedCell CellOf(const std::vector<Trial>& trials, int row,
                           const ExpectedColumn& column) {
  std::vector<Trial> cell;
  for (const Trial& t : trials) {
    if (t.corpus == column.corpus && t.scale == column.scale && t.row == row) cell.push_back(t);
  }
  std::sort(cell.begin(), cell.end(), [](const Trial& a, const Trial& b) { return a.id < b.id; });
  ExpectedCell expected;
  std::vector<double> values;
  std::vector<const Trial*> failed, unscored;  // the seeds left out, each trial one seed
  for (const Trial& t : cell) {
    if (Failed(t)) {
      failed.push_back(&t);
      continue;
    }
    if (std::optional<double> value = ValueOf(t, column)) {
      values.push_back(*value);
      expected.trials.push_back(t.id);
    } else {
      unscored.push_back(&t);
    }
  }
  expected.stats = Describe(values);
  if (values.empty()) expected.missing = MissingNote(cell, column);
  if (values.empty() && failed.empty()) unscored.clear();  // the row lacks it: a plain "–"
  SeedCount(values.size(), failed, unscored, &expected);
  return expected;
}

inline ExpectedTable Expect(const std::vector<Trial>& trials, std::vector<ExpectedColumn> columns,
                            int decimals) {
  ExpectedTable table;
  table.columns = std::move(columns);
  table.decimals = decimals;
  for (size_t r = 0; r < kRows.size(); ++r) {
    for (const ExpectedColumn& column : table.columns) {
      table.cells.push_back(CellOf(trials, static_cast<int>(r), column));
      const std::string& note = table.cells.back().missing;
      if (!note.empty() &&
          std::find(table.notes.begin(), table.notes.end(), note) == table.notes.end()) {
        table.notes.push_back(note);
      }
    }
  }
  return table;
}

// Table 2 (train and val loss) or 3 (val perplexity): FineWeb-Edu then OpenWebText, S, M, L.
inline ExpectedTable ExpectLossTable(const std::vector<Trial>& trials, bool perplexity) {
  std::vector<ExpectedColumn> columns;
  for (int c = 0; c < 2; ++c) {
    for (int s = 0; s < 3; ++s) {
      const std::string at = kCorpora[c] + " " + kScales[s];
      if (perplexity) {
        columns.push_back({at + " ppl ↓", c, s, "val/ppl", false, -1});
      } else {
        columns.push_back({at + " train ↓", c, s, "train/loss_avg", false, -1});
        columns.push_back({at + " val ↓", c, s, "val/loss", false, -1});
      }
    }
  }
  return Expect(trials, columns, perplexity ? 2 : 3);
}

// Table 4 (FineWeb-Edu) or 5 (OpenWebText): the L models' twelve scores and our average.
inline ExpectedTable ExpectZeroShotTable(const std::vector<Trial>& trials, int corpus) {
  std::vector<ExpectedColumn> columns;
  for (int j = 0; j < static_cast<int>(kZeroShot.size()); ++j) {
    const ZeroShotColumn& z = kZeroShot[j];
    columns.push_back(
        {z.header, corpus, kL, "zeroshot/" + z.task + "/" + z.metric, j < kAccuracies, j});
  }
  columns.push_back({"Avg. acc ↑ (ours)", corpus, kL, "zeroshot/average/acc", true, kAverage});
  return Expect(trials, columns, 2);
}

}  // namespace spheret::known
