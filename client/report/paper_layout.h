// The paper's Tables 2-5 in its exact layout, from trials of any set of sweeps that hold the
// cells (`spheret report --paper`); each table, its columns and figure as declared in
// paper_tables.h. Pure: no I/O, no RPC types.
//
//   Table 2  train and val loss, the paper's 8 rows x (FineWeb-Edu, OpenWebText) x (S, M, L)
//   Table 3  val perplexity, the same rows and column groups
//   Table 4  zero-shot scores of the L models trained on FineWeb-Edu: the paper's 12 columns in
//            its order, plus an average accuracy column that is ours (not in the paper)
//   Table 5  the same for OpenWebText
//
// Every cell is n, mean, standard deviation and 95% Student t interval over seeds (stats.h); each
// column's best mean is bold and the second underlined, by the metric's direction; a cell no
// counted trial fills prints "–" with a note naming the trial (or saying none was given). A cell
// whose seeds were not all counted says so in place of n ("(2 of 3; 1 diverged at step 140)"),
// a note names each seed left out, and a mark on such a cell carries a dagger (seed_account.h).
// Every table and figure names its confounds: the effective config keys that differ between the
// rows of a column beyond method, p and seed (confounds.h), in a note and a CSV/JSON field.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/report/confounds.h"
#include "client/report/paper_tables.h"
#include "client/report/results.h"
#include "client/report/seed_account.h"
#include "client/report/table.h"

namespace spheret::client {

// "table2" ... "figure3" (PaperOutputSpecs' names); InvalidArgument naming the six otherwise.
absl::StatusOr<PaperOutput> ParsePaperOutput(const std::string& name);
std::string PaperOutputName(PaperOutput output);
bool IsPaperFigure(PaperOutput output);
// The corpus a table or figure is about: Tables 4-5 and Figures 2-3 have one (FineWeb-Edu for
// 4 and 2, OpenWebText for 5 and 3); Tables 2-3 show both ("").
std::string PaperOutputCorpus(PaperOutput output);

// The paper's two corpora, in its column order.
inline constexpr char kFineWebEdu[] = "FineWeb-Edu";
inline constexpr char kOpenWebText[] = "OpenWebText";

// The corpus a trial stands for: its data set's paper name (PaperDatasetOf), else the corpus the
// sweep's name names ("openwebtext-cpu" -> OpenWebText: the CPU twins train on one
// built-in corpus and stand for the paper's two), else the data set as it is.
std::string CorpusOf(const TrialConfig& config, const std::string& sweep_name);

// One trial and the corpus it stands for.
struct PaperTrial {
  TrialResult result;
  std::string corpus;
};

struct PaperTableOptions {
  // Decimals of the printed cells; 0: the paper's (3 for losses, 2 for perplexities and scores).
  // Marks compare the means as printed, so values that print alike tie.
  int decimals = 0;
  const PaperNumbers* paper = nullptr;  // non-null: each cell also shows the published value
};

// One cell of a paper table before it is printed.
struct PaperCell {
  std::string row;     // the paper's row name: "Pre-LN", ..., "p-SpheretNorm (p=0.5)"
  std::string corpus;  // "FineWeb-Edu", ...
  std::string scale;   // "S", ...
  std::string metric;  // the column's declared metric: a catalog name, a zero-shot score's name
                       // (zeroshot/boolq/acc), or kAverageAccuracy
  Description stats;   // over seeds; n = 0 when missing
  std::vector<int64_t> trial_ids;
  std::optional<double> paper;
  std::string missing;  // why the cell is "–" (empty when it has values)
  // The cell's seeds: counted, and each one left out (DIVERGED, FAILED, ... or, where another
  // seed has the value, a SUCCEEDED one without it). Always said in the cell and in a note.
  SeedAccount seeds{};
};
// The metric name of the average-accuracy column (ours): per trial, the mean of the ten accuracy
// columns, then described over seeds like any metric.
inline constexpr char kAverageAccuracy[] = "zeroshot/average/acc";

struct PaperTableData {
  std::string title;
  std::vector<std::string> rows;    // row names, in the paper's order
  std::vector<std::string> header;  // "method", then one name per column
  // LaTeX: the column groups above a header of short names (corpus, scale; Tables 2-3).
  std::vector<std::vector<std::pair<std::string, size_t>>> groups;
  std::vector<std::string> short_header;
  std::vector<PaperCell> cells;  // rows x columns, row-major
  // Each column's direction (the best mean is the highest, the lowest, or none is marked), and
  // the decimals the table prints by default (PaperOutputSpec).
  std::vector<protocol::Direction> directions;
  int decimals = 3;
  // What else differs between the rows of a column (corpus and scale) beyond method, p and seed
  // (and the zero-shot evaluation's keys): over the table, and by "CORPUS SCALE".
  std::vector<Confound> confounds;
  std::map<std::string, std::vector<Confound>> column_confounds;
  std::vector<std::string> left_out;  // trials not in the table and why
  // What the cells are, the marks, each "–"'s reason, the seeds cells left out, the left-out
  // trials ("Left out: ...") and the confounds ("Confound: rows also differ in ...").
  std::vector<std::string> notes;
};

// The cells of Table 2, 3, 4 or 5 from `trials` (SUCCEEDED trials count; a trial of another
// method, or the same cell and seed filled twice, is an error naming both trials).
absl::StatusOr<PaperTableData> BuildPaperTable(PaperOutput output,
                                               const std::vector<PaperTrial>& trials,
                                               const PaperTableOptions& options);
// The same for any declared table (PaperOutputSpecOf(output) for the paper's own).
absl::StatusOr<PaperTableData> BuildPaperTable(const PaperOutputSpec& spec,
                                               const std::vector<PaperTrial>& trials,
                                               const PaperTableOptions& options);

// The table to print (md, tex, txt): cells "mean ± std [95% CI] (n)" or "... (2 of 3; 1 diverged
// at step 140)", marks (a dagger on a marked cell that left seeds out) and notes.
Table PaperTableText(const PaperTableData& data, const PaperTableOptions& options);
// One line per cell at full precision (csv, json): row, corpus, scale, metric, n, mean, std,
// ci95_low, ci95_high, trials, paper, missing, n_total (the seeds run), left_out ("seed 1339
// (trial 12) diverged at step 140; ...", "" when none), confounds (ConfoundField of its column).
Table PaperTableLong(const PaperTableData& data);

// The trials of Figure 2's or 3's corpus in the paper's rows (every scale: its loss curves per
// corpus), a repeat of another's training once; SUCCEEDED ones only, as the tables count; an
// error as BuildPaperTable's.
absl::StatusOr<std::vector<int64_t>> FigureTrials(PaperOutput output,
                                                  const std::vector<PaperTrial>& trials);

// The seeds Figure 2's or 3's lines leave out, per paper row and scale: `cell_of` maps each
// drawn trial to its cell ("ROW at SCALE"), `seeds` each cell that left seeds out to its account,
// `notes` one line per such cell (LostSeedsNote), then one per confound of the lines of a panel
// ("Confound: rows also differ in ..."), `confounds` each panel's (scale's) confounds as one
// field (ConfoundField). An error as FigureTrials'.
struct FigureSeeds {
  std::map<int64_t, std::string> cell_of;
  std::map<std::string, SeedAccount> seeds;
  std::vector<std::string> notes;
  std::map<std::string, std::string> confounds;
};
absl::StatusOr<FigureSeeds> FigureSeedsOf(PaperOutput output,
                                          const std::vector<PaperTrial>& trials);

}  // namespace spheret::client
