// The paper's Tables 2-5 and Figures 2-3 as data: each output is one declaration (its name, the
// corpus it is about, title, layout and decimals) and each of its columns (or a figure's curves)
// one line: which metric, how a trial's value of it is read, its heading and where the paper
// publishes it. A column's words in notes and its direction (the ↑/↓ and which mean is best) come
// from the metric catalog (protocol/metric_catalog.h); a zero-shot score's from its name. The
// layout (paper_layout.h) builds any declared table, and the list of metrics the CLI fetches is
// derived from the declarations. Pure: no I/O.
//
// Adding a column to Table 2 from a metric of the catalog is one line in its declaration
// (paper_tables.cc), e.g.
//     {protocol::kTrainLossSpikes, "spikes"},
// which puts "CORPUS SCALE spikes ↓" under every corpus and scale of Table 2 in every format
// (txt, md, tex, csv, json) and adds train/loss_spikes to PaperFetchMetrics().
#pragma once

#include <string>
#include <vector>

#include "protocol/metric_catalog.h"

namespace spheret::client {

enum class PaperOutput { kTable2, kTable3, kTable4, kTable5, kFigure2, kFigure3 };

// How a trial's value of a column is read from its final values.
enum class PaperReading {
  kLast,              // the metric's last value
  kElseExpValLoss,    // else exp(val/loss): runs that logged only the loss have no val/ppl
  kMeanOfAccuracies,  // the mean of the table's accuracy columns, when the trial has them all
};

// One column of a table (repeated under every corpus and scale of Tables 2-3), or one curve of a
// figure.
struct PaperColumnSpec {
  std::string metric;      // a catalog name, or a zero-shot score's (zeroshot/TASK/METRIC)
  std::string heading;     // Tables 2-3: after "CORPUS SCALE" ("train"); Tables 4-5: the whole
                           // heading ("ARC-C acc_n"); figures: the files' stem ("train")
  std::string paper = "";  // its metric in reference/paper_tables.csv ("train_loss"); "" when the
                           // paper publishes none (a zero-shot score's is its TASK/METRIC)
  PaperReading reading = PaperReading::kLast;
  std::string what = "";   // its name in notes; "": the catalog's label, else the heading
  std::string after = "";  // printed after the direction's arrow (" (ours)")
};

// How a table's columns are laid out.
enum class PaperLayout {
  kByCorpusAndScale,  // the columns under each corpus and scale; LaTeX groups: corpus, scale
  kByCorpus,          // the same, LaTeX groups: corpus (the scale heads each column)
  kZeroShot,          // the columns once, at the output's corpus and its largest model
  kFigure,            // a figure: one image per column (curve), a panel per scale
};

struct PaperOutputSpec {
  PaperOutput output;
  std::string name;    // on the command line and in file names: "table2"
  std::string corpus;  // the one corpus it is about; "" for both
  std::string title;   // "Table 2: train and validation loss"; kZeroShot: "Table 4", and the
                       // layout adds ": zero-shot results of the L models trained on CORPUS"
  PaperLayout layout;
  int decimals;  // of the printed cells (losses 3, perplexities and scores 2)
  std::vector<PaperColumnSpec> columns;
};

// Every output, in the paper's order: Tables 2, 3, 4, 5, Figures 2, 3.
const std::vector<PaperOutputSpec>& PaperOutputSpecs();
const PaperOutputSpec& PaperOutputSpecOf(PaperOutput output);

// The metrics the tables of `specs` read from each trial's final values, in declaration order
// (zero-shot scores come with every trial's results and are not named).
std::vector<std::string> PaperFetchMetrics(
    const std::vector<PaperOutputSpec>& specs = PaperOutputSpecs());

// A column's direction: the catalog's, or for a name the catalog does not know (a zero-shot
// score) higher for accuracies and lower otherwise (HigherIsBetter).
protocol::Direction PaperDirection(const PaperColumnSpec& column);
// "↑", "↓", or "" for a metric with no direction.
std::string DirectionArrow(protocol::Direction direction);
// The column's name in notes ("train loss", "ARC-C acc_n").
std::string PaperWhat(const PaperColumnSpec& column);

// reference/paper_tables.csv's metric for one of ours: the declared column's `paper`, else a
// zero-shot score's TASK/METRIC, else the name as it is.
std::string PaperMetricName(const std::string& metric);

}  // namespace spheret::client
