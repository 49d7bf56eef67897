// The known values of cli_paper_known_values_test.cc: a database of 2 corpora x 3 scales x 8 rows
// x 3 seeds whose every value a formula gives, and the statistics the paper's tables must print
// for them, computed here without the report code (mean, n - 1 standard deviation, the 95%
// Student t interval with t hard-coded, printf rounding).
//
// The formulas rank the rows differently in each column, and give some columns two rows whose
// means differ but print alike (ties at the best or the second mark). Cells are left out on
// purpose: GeoNorm at FineWeb-Edu M and Pre-LN at OpenWebText L are FAILED (every seed), Pre-DyT
// at OpenWebText S has one FAILED seed (each crashed after step 10, its curves stopping there);
// Keel at FineWeb-Edu L has no zero-shot score at all, p = 2 at FineWeb-Edu L none for seed 1, and
// Peri-LN at OpenWebText L no WinoGrande for seed 2.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace spheret::known {

inline const std::vector<std::string> kCorpora = {"FineWeb-Edu", "OpenWebText"};
inline const std::vector<std::string> kDatasets = {"fineweb-edu", "openwebtext"};
inline const std::vector<std::string> kScales = {"S", "M", "L"};
inline constexpr int kSeeds = 3;  // seeds 1, 2, 3 (index 0, 1, 2)
inline constexpr int kFinalStep = 30;
inline const std::vector<int> kTrainSteps = {0, 10, 20, 30};
inline const std::vector<int> kValSteps = {0, 15, 30};

// The paper's rows in its order: method, p (0 when none), name, and the line's label in figures.
struct Row {
  std::string method;
  double p;
  std::string name;
  std::string label;
};
inline const std::vector<Row> kRows = {
    {"pre_ln", 0, "Pre-LN", "pre_ln"},
    {"pre_dyt", 0, "Pre-DyT", "pre_dyt"},
    {"peri_ln", 0, "Peri-LN", "peri_ln"},
    {"keel", 0, "Keel", "keel"},
    {"geonorm", 0, "GeoNorm", "geonorm"},
    {"p_spheret", 0.5, "p-SpheretNorm (p=0.5)", "p_spheret p=0.5"},
    {"p_spheret", 1, "p-SpheretNorm (p=1)", "p_spheret p=1"},
    {"p_spheret", 2, "p-SpheretNorm (p=2)", "p_spheret p=2"}};
enum RowIndex { kPreLn, kPreDyt, kPeriLn, kKeel, kGeoNorm, kP05, kP1, kP2 };
enum CorpusIndex { kFwe, kOwt };
enum ScaleIndex { kS, kM, kL };

// Tables 4-5's columns in the paper's order: task, metric, header; the first ten are accuracies.
struct ZeroShotColumn {
  std::string task;
  std::string metric;
  std::string header;
};
inline const std::vector<ZeroShotColumn> kZeroShot = {
    {"arc_challenge", "acc_norm", "ARC-C acc_n ↑"},
    {"arc_easy", "acc_norm", "ARC-E acc_n ↑"},
    {"boolq", "acc", "BoolQ acc ↑"},
    {"hellaswag", "acc_norm", "HellaSwag acc_n ↑"},
    {"lambada_openai", "acc", "LAMBADA acc ↑"},
    {"openbookqa", "acc_norm", "OBQA acc_n ↑"},
    {"piqa", "acc_norm", "PIQA acc_n ↑"},
    {"sciq", "acc", "SciQ acc ↑"},
    {"social_iqa", "acc", "SocialIQa acc ↑"},
    {"winogrande", "acc", "WinoGrande acc ↑"},
    {"lambada_openai", "perplexity", "LAMBADA ppl ↓"},
    {"wikitext", "word_perplexity", "WikiText ppl ↓"}};
inline constexpr int kAccuracies = 10;
inline constexpr int kWinoGrande = 9;

// One trial of the database: where it stands and what its fake worker reported.
struct Trial {
  int64_t id = 0;
  int corpus = 0, scale = 0, row = 0, seed = 0;
};

inline bool Failed(int corpus, int scale, int row, int seed) {
  return (corpus == kFwe && scale == kM && row == kGeoNorm) ||
         (corpus == kOwt && scale == kL && row == kPreLn) ||
         (corpus == kOwt && scale == kS && row == kPreDyt && seed == 2);
}
inline bool Failed(const Trial& t) { return Failed(t.corpus, t.scale, t.row, t.seed); }
// Whether the trial reports zero-shot scores (L trials only, but for the ones left out).
inline bool Scored(const Trial& t) {
  return t.scale == kL && !Failed(t) && !(t.corpus == kFwe && t.row == kKeel) &&
         !(t.corpus == kFwe && t.row == kP2 && t.seed == 0);
}
// Whether a scored trial reports zero-shot column `column`.
inline bool Reports(const Trial& t, int column) {
  return Scored(t) &&
         !(t.corpus == kOwt && t.row == kPeriLn && t.seed == 1 && column == kWinoGrande);
}

// Rank patterns: none tied, the best two tied, the second and third tied (0 is the best).
inline constexpr int kRanks[3][8] = {
    {0, 1, 2, 3, 4, 5, 6, 7}, {0, 0, 2, 3, 4, 5, 6, 7}, {0, 1, 1, 3, 4, 5, 6, 7}};
inline constexpr double kSpread[3] = {-1, 0.4, 0.6};  // per seed, mean 0
inline int Rank(int pattern, int rotation, int row) {
  return kRanks[pattern][(row + rotation) % 8];
}

// The final (last) train/loss_avg (`val` false) or val/loss of a trial. A row's mean is a multiple
// of 0.01 plus 0.0001 for odd rows: rows of one rank print alike at 3 decimals but differ.
inline double FinalLoss(const Trial& t, bool val) {
  const int column = t.corpus * 6 + t.scale * 2 + (val ? 1 : 0);
  const double base = 3.3 + 0.12 * t.corpus - 0.25 * t.scale - (val ? 0 : 0.1);
  const double spread = 0.002 * (1 + t.row % 4);
  const double odd = t.seed == 2 ? 0.0003 * (t.row % 2) : 0;
  return base + 0.01 * Rank(column % 3, (t.corpus + 2 * t.scale + (val ? 5 : 0)) % 8, t.row) +
         spread * kSpread[t.seed] + odd;
}
// The curve before the last step: not monotone, so its last value is not its least.
inline double LossAt(const Trial& t, bool val, int step) {
  const double final_loss = FinalLoss(t, val);
  if (step == kFinalStep) return final_loss;
  if (step == (val ? 15 : 20)) return final_loss - 0.05;
  return final_loss + 0.8 * (kFinalStep - step) / kFinalStep;
}
// A zero-shot score as the trainer reports it: accuracies as fractions, perplexities as they are.
inline double ZeroShotValue(const Trial& t, int column) {
  const int rank = Rank((column + t.corpus) % 3, (column + 3 * t.corpus) % 8, t.row);
  const double spread = 0.003 * (1 + t.row % 3) * kSpread[t.seed];
  const double odd = t.seed == 2 ? 0.00003 * (t.row % 2) : 0;
  if (column < kAccuracies) return 0.30 + 0.03 * column - 0.004 * rank + spread + odd;
  return (column == 10 ? 25 : 40) + 0.5 * rank + 10 * spread + 100 * odd;
}
// As the tables show it: accuracies in percent.
inline double ZeroShotShown(const Trial& t, int column) {
  return column < kAccuracies ? 100 * ZeroShotValue(t, column) : ZeroShotValue(t, column);
}

// A cell over seeds: n, mean, sample std (n - 1), 95% Student t interval of the mean.
struct Stats {
  int n = 0;
  double mean = 0, std = 0, low = 0, high = 0;
};
inline Stats Describe(const std::vector<double>& values) {
  Stats s;
  s.n = static_cast<int>(values.size());
  if (s.n == 0) return s;
  for (double v : values) s.mean += v;
  s.mean /= s.n;
  double squares = 0;
  for (double v : values) squares += (v - s.mean) * (v - s.mean);
  s.std = s.n > 1 ? std::sqrt(squares / (s.n - 1)) : NAN;
  // t(0.975, df) for df = n - 1: scipy.stats.t.ppf(0.975, 1) and (0.975, 2).
  const double t = s.n == 2 ? 12.706204736174703 : s.n == 3 ? 4.302652729749464 : NAN;
  s.low = s.mean - t * s.std / std::sqrt(s.n);
  s.high = s.mean + t * s.std / std::sqrt(s.n);
  return s;
}

inline std::string Fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.*f", decimals, value);
  return buffer;
}

// A printed cell: "mean ± std [low, high] (n)", "–" when empty.
inline std::string CellText(const Stats& s, int decimals) {
  if (s.n == 0) return "–";
  std::string text = Fixed(s.mean, decimals);
  if (s.n > 1) {
    text += " ± " + Fixed(s.std, decimals) + " [" + Fixed(s.low, decimals) + ", " +
            Fixed(s.high, decimals) + "]";
  }
  return text + " (" + std::to_string(s.n) + ")";
}

// The marks of one column: 2 for the best printed mean (by direction), 1 for the second, 0 else;
// means that print alike share their mark.
inline std::vector<int> Marks(const std::vector<Stats>& column, bool higher, int decimals) {
  std::vector<std::optional<double>> shown;
  for (const Stats& s : column) {
    shown.push_back(s.n > 0 ? std::optional<double>(std::stod(Fixed(s.mean, decimals)))
                            : std::nullopt);
  }
  const auto better = [&](double a, double b) { return higher ? a > b : a < b; };
  std::optional<double> best, second;
  for (const auto& v : shown) {
    if (v && (!best || better(*v, *best))) best = v;
  }
  for (const auto& v : shown) {
    if (v && *v != *best && (!second || better(*v, *second))) second = v;
  }
  std::vector<int> marks;
  for (const auto& v : shown) marks.push_back(!v ? 0 : *v == *best ? 2 : v == second ? 1 : 0);
  return marks;
}

}  // namespace spheret::known
