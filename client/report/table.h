// A table of strings and its renderings: aligned text for terminals, CSV (RFC 4180), JSON (an
// array of objects keyed by the header), Markdown and a LaTeX tabular.
#pragma once

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace spheret::client {

enum class Format { kTable, kCsv, kJson, kMarkdown, kLatex };

// "table" (or "txt"), "csv", "json", "md" (or "markdown") or "latex" (or "tex").
absl::StatusOr<Format> ParseFormat(const std::string& name);
// The usual file extension of a format: txt, csv, json, md, tex.
std::string FormatExtension(Format format);

struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;  // each as long as the header
  // Columns whose cells are numbers (JSON writes them unquoted; empty cells become null).
  std::vector<bool> numeric;
  // Cells to emphasize (row, column), as the paper does: the best value of a column in bold
  // (Markdown, LaTeX; a trailing " *" in text), the second underlined (<u>…</u> in Markdown,
  // \underline in LaTeX, a trailing " +" in text).
  std::set<std::pair<size_t, size_t>> best;
  std::set<std::pair<size_t, size_t>> second;
  bool IsBest(size_t row, size_t column) const { return best.count({row, column}) != 0; }
  bool IsSecond(size_t row, size_t column) const { return second.count({row, column}) != 0; }
  // LaTeX only: rows of column groups above the header, each group a label and the number of
  // columns it spans after the first (a \multicolumn with a \cmidrule under it), and the header
  // under them (when empty, `header`): "FineWeb-Edu" over "S" over "train ↓".
  std::vector<std::vector<std::pair<std::string, size_t>>> groups;
  std::vector<std::string> grouped_header;
  // Lines printed under the table (Markdown, LaTeX and text; CSV and JSON hold only the rows),
  // e.g. what a "–" cell lacks.
  std::vector<std::string> notes;
};

// Every renderer shows each header and cell as PrintableText (base/printable.h) does: control
// characters and terminal escapes in names and values that others chose become visible escapes
// (JSON writes them as \u escapes, exactly).
std::string Render(const Table& table, Format format);
std::string RenderText(const Table& table);
std::string RenderCsv(const Table& table);
std::string RenderJson(const Table& table);
std::string RenderMarkdown(const Table& table);
// A complete tabular environment with booktabs' rules (\usepackage{booktabs}); "±", "‖", "θ",
// "α", "↑", "↓" and "–" become $\pm$, $\|$, $\theta$, $\alpha$, $\uparrow$, $\downarrow$ and --.
std::string RenderLatex(const Table& table);

// From this magnitude on, FormatNumber writes a number in exponent form.
inline constexpr double kLargestFixedNumber = 1e15;
// printf("%.*f") (at most 30 decimals) below kLargestFixedNumber in magnitude, "%.15g" from it
// on ("1e+308", not 309 digits), or "" for NaN.
std::string FormatNumber(double value, int decimals);
// Full precision for machine-readable output ("%.17g"), or "" for NaN.
std::string ExactNumber(double value);

}  // namespace spheret::client
