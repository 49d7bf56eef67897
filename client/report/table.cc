#include "client/report/table.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "absl/strings/str_replace.h"
#include "base/printable.h"

namespace spheret::client {
namespace {

// Display width of UTF-8 text (counts code points, enough for "±").
size_t Width(const std::string& text) {
  size_t width = 0;
  for (unsigned char c : text) width += (c & 0xC0) != 0x80;
  return width;
}

std::string CsvField(const std::string& field) {
  if (field.find_first_of(",\"\n\r") == std::string::npos) return field;
  return "\"" + absl::StrReplaceAll(field, {{"\"", "\"\""}}) + "\"";
}

std::string LatexEscape(const std::string& text) {
  return absl::StrReplaceAll(text, {{"\\", "\\textbackslash{}"},
                                    {"&", "\\&"},
                                    {"%", "\\%"},
                                    {"$", "\\$"},
                                    {"#", "\\#"},
                                    {"_", "\\_"},
                                    {"{", "\\{"},
                                    {"}", "\\}"},
                                    {"~", "\\textasciitilde{}"},
                                    {"`", "\\textasciigrave{}"},
                                    {"^", "\\textasciicircum{}"},
                                    {"±", "$\\pm$"},
                                    {"‖", "$\\|$"},
                                    {"θ", "$\\theta$"},
                                    {"α", "$\\alpha$"},
                                    {"κ", "$\\kappa$"},
                                    {"Σ", "$\\Sigma$"},
                                    {"Δ", "$\\Delta$"},
                                    {"²", "$^2$"},
                                    {"↑", "$\\uparrow$"},
                                    {"↓", "$\\downarrow$"},
                                    {"–", "--"},
                                    {"—", "---"},
                                    {"≈", "$\\approx$"},
                                    {"†", "\\dag{}"}});
}

// `table` with every header and cell made printable: names, config values and errors come from
// submitters and trainers, and a terminal escape among them must not reach the screen (or a
// report file someone will `cat`).
Table Printable(const Table& table) {
  Table printable = table;
  for (std::string& cell : printable.header) cell = PrintableText(cell);
  for (auto& row : printable.rows) {
    for (std::string& cell : row) cell = PrintableText(cell);
  }
  for (std::string& note : printable.notes) note = PrintableText(note);
  for (std::string& cell : printable.grouped_header) cell = PrintableText(cell);
  for (auto& groups : printable.groups) {
    for (auto& group : groups) group.first = PrintableText(group.first);
  }
  return printable;
}

}  // namespace

absl::StatusOr<Format> ParseFormat(const std::string& name) {
  if (name == "table" || name == "txt") return Format::kTable;
  if (name == "csv") return Format::kCsv;
  if (name == "json") return Format::kJson;
  if (name == "md" || name == "markdown") return Format::kMarkdown;
  if (name == "latex" || name == "tex") return Format::kLatex;
  return absl::InvalidArgumentError("--format: '" + name +
                                    "' is not one of table, csv, json, md, latex");
}

std::string FormatExtension(Format format) {
  switch (format) {
    case Format::kTable:
      return "txt";
    case Format::kCsv:
      return "csv";
    case Format::kJson:
      return "json";
    case Format::kMarkdown:
      return "md";
    case Format::kLatex:
      return "tex";
  }
  return "txt";
}

std::string Render(const Table& table, Format format) {
  switch (format) {
    case Format::kTable:
      return RenderText(table);
    case Format::kCsv:
      return RenderCsv(table);
    case Format::kJson:
      return RenderJson(table);
    case Format::kMarkdown:
      return RenderMarkdown(table);
    case Format::kLatex:
      return RenderLatex(table);
  }
  return RenderText(table);
}

std::string RenderText(const Table& untrusted) {
  const Table table = Printable(untrusted);
  std::vector<size_t> widths(table.header.size(), 0);
  const auto measure = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size() && i < widths.size(); ++i)
      widths[i] = std::max(widths[i], Width(row[i]));
  };
  std::vector<std::vector<std::string>> rows = table.rows;
  for (size_t r = 0; r < rows.size(); ++r) {
    for (size_t c = 0; c < rows[r].size(); ++c) {
      if (table.IsBest(r, c)) rows[r][c] += " *";
      if (table.IsSecond(r, c)) rows[r][c] += " +";
    }
  }
  measure(table.header);
  for (const auto& row : rows) measure(row);
  std::string out;
  const auto line = [&](const std::vector<std::string>& row) {
    std::string text;
    for (size_t i = 0; i < row.size() && i < widths.size(); ++i) {
      text += row[i];
      if (i + 1 < row.size()) text += std::string(widths[i] - Width(row[i]) + 2, ' ');
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out += text + "\n";
  };
  line(table.header);
  for (const auto& row : rows) line(row);
  for (const std::string& note : table.notes) out += note + "\n";
  return out;
}

std::string RenderCsv(const Table& untrusted) {
  const Table table = Printable(untrusted);
  std::string out;
  const auto line = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size(); ++i) out += (i ? "," : "") + CsvField(row[i]);
    out += "\n";
  };
  line(table.header);
  for (const auto& row : table.rows) line(row);
  return out;
}

std::string RenderJson(const Table& table) {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const auto& row : table.rows) {
    nlohmann::ordered_json object = nlohmann::ordered_json::object();
    for (size_t i = 0; i < row.size() && i < table.header.size(); ++i) {
      const bool numeric = i < table.numeric.size() && table.numeric[i];
      if (!numeric) {
        object[table.header[i]] = row[i];
      } else if (row[i].empty()) {
        object[table.header[i]] = nullptr;
      } else {
        object[table.header[i]] = std::stod(row[i]);
      }
    }
    rows.push_back(std::move(object));
  }
  // ASCII only (\u escapes): no control character reaches a terminal, and the values stay exact.
  return rows.dump(2, ' ', /*ensure_ascii=*/true,
                   nlohmann::ordered_json::error_handler_t::replace) +
         "\n";
}

std::string RenderMarkdown(const Table& untrusted) {
  const Table table = Printable(untrusted);
  const auto escape = [](const std::string& cell) {
    return absl::StrReplaceAll(cell, {{"|", "\\|"}});
  };
  std::string out = "|";
  for (const auto& cell : table.header) out += " " + escape(cell) + " |";
  out += "\n|";
  for (size_t i = 0; i < table.header.size(); ++i) out += i == 0 ? " --- |" : " ---: |";
  out += "\n";
  for (size_t r = 0; r < table.rows.size(); ++r) {
    out += "|";
    for (size_t c = 0; c < table.rows[r].size(); ++c) {
      const std::string cell = escape(table.rows[r][c]);
      const std::string marked = table.IsBest(r, c)     ? "**" + cell + "**"
                                 : table.IsSecond(r, c) ? "<u>" + cell + "</u>"
                                                        : cell;
      out += " " + marked + " |";
    }
    out += "\n";
  }
  if (!table.notes.empty()) out += "\n";
  for (const std::string& note : table.notes) out += escape(note) + "\n\n";
  return out;
}

std::string RenderLatex(const Table& untrusted) {
  const Table table = Printable(untrusted);
  std::string out = "\\begin{tabular}{l" + std::string(table.header.size() - 1, 'r') + "}\n";
  out += "\\toprule\n";
  const auto line = [&](const std::vector<std::string>& row, size_t r) {
    for (size_t i = 0; i < row.size(); ++i) {
      const std::string cell = LatexEscape(row[i]);
      const std::string marked = table.IsBest(r, i)     ? "\\textbf{" + cell + "}"
                                 : table.IsSecond(r, i) ? "\\underline{" + cell + "}"
                                                        : cell;
      out += (i ? " & " : "") + marked;
    }
    out += " \\\\\n";
  };
  for (const auto& groups : table.groups) {
    std::string rules;
    size_t column = 2;  // LaTeX counts from 1; the first column is the row names
    for (const auto& [label, span] : groups) {
      out += " & \\multicolumn{" + std::to_string(span) + "}{c}{" + LatexEscape(label) + "}";
      rules += "\\cmidrule(lr){" + std::to_string(column) + "-" +
               std::to_string(column + span - 1) + "}";
      column += span;
    }
    out += " \\\\\n" + rules + "\n";
  }
  line(table.grouped_header.empty() ? table.header : table.grouped_header, table.rows.size());
  out += "\\midrule\n";
  for (size_t r = 0; r < table.rows.size(); ++r) line(table.rows[r], r);
  out += "\\bottomrule\n\\end{tabular}\n";
  // Notes as paragraphs after the tabular (a document or a table float holds both).
  for (const std::string& note : table.notes) out += "\n" + LatexEscape(note) + "\n";
  return out;
}

std::string FormatNumber(double value, int decimals) {
  if (std::isnan(value)) return "";
  char buffer[64];
  // From 1e15 on "%f" shows digits no double holds (1e308 had 309, cut to 63 here): 15
  // significant digits in exponent form say all that is known.
  if (std::fabs(value) >= kLargestFixedNumber && std::isfinite(value)) {
    std::snprintf(buffer, sizeof(buffer), "%.15g", value);
  } else {
    std::snprintf(buffer, sizeof(buffer), "%.*f", std::clamp(decimals, 0, 30), value);
  }
  return buffer;
}

std::string ExactNumber(double value) {
  if (std::isnan(value)) return "";
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.17g", value);
  return buffer;
}

}  // namespace spheret::client
