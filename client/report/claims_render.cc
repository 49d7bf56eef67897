// The claims report in every format (claims.h).
#include <array>
#include <cmath>
#include <map>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/report/claims.h"
#include "protocol/metric_catalog.h"

namespace spheret::client {
namespace {

std::string MetricId(ClaimMetric metric) {
  switch (metric) {
    case ClaimMetric::kFinalValLoss:
      return protocol::kValLoss;
    case ClaimMetric::kLossSpikes:
      return protocol::kTrainLossSpikes;
    case ClaimMetric::kStepsToLoss:
      return "steps_to_val_loss";
    default:
      return "diverged";
  }
}

std::string MetricWords(ClaimMetric metric) {
  switch (metric) {
    case ClaimMetric::kFinalValLoss:
      return "final validation loss";
    case ClaimMetric::kLossSpikes:
      return "loss spikes (train/loss_spikes)";
    case ClaimMetric::kStepsToLoss:
      return "steps to reach a validation loss that every counted trial of both rows reaches";
    default:
      return "divergences (DIVERGED among SUCCEEDED and DIVERGED trials)";
  }
}

std::string Expect(const Claim& claim) { return claim.a_lower ? "A < B" : "A > B"; }

double PValue(const ClaimComparison& c) {
  return c.claim->metric == ClaimMetric::kDivergences ? c.fisher_p : c.difference.p;
}

template <typename T>
std::string Joined(const std::vector<T>& values) {
  std::vector<std::string> parts;
  for (const T& v : values) {
    if constexpr (std::is_same_v<T, double>) {
      parts.push_back(ExactNumber(v));
    } else {
      parts.push_back(absl::StrCat(v));
    }
  }
  return absl::StrJoin(parts, " ");
}

int DecimalsOf(ClaimMetric metric, int decimals) {
  if (metric == ClaimMetric::kStepsToLoss) return 1;
  if (metric == ClaimMetric::kLossSpikes || metric == ClaimMetric::kDivergences) return 2;
  return decimals;
}

std::string PText(double p) { return std::isnan(p) ? "" : absl::StrFormat("%.3g", p); }

// A row's value as the text formats show it.
std::string SideText(const ClaimComparison& c, bool a, int decimals) {
  const size_t n = a ? c.a_values.size() : c.b_values.size();
  if (c.claim->metric == ClaimMetric::kDivergences) {
    return absl::StrCat(a ? c.diverged_a : c.diverged_b, " of ", n, " diverged");
  }
  return absl::StrCat(FormatNumber(a ? c.mean_a : c.mean_b, decimals), " (", n, ")");
}

std::string EffectText(const ClaimComparison& c, int decimals) {
  std::string text = FormatNumber(c.difference.mean, decimals);
  if (!std::isnan(c.difference.ci_low)) {
    absl::StrAppend(&text, " [", FormatNumber(c.difference.ci_low, decimals), ", ",
                    FormatNumber(c.difference.ci_high, decimals), "]");
  }
  return text;
}

// One claim's comparisons as a table, with confounds, thresholds and left-out trials as notes.
Table ClaimTable(const std::vector<const ClaimComparison*>& comparisons, int decimals) {
  Table table;
  table.header = {"setting",        "A", "B",      "test", "A: mean (n)", "B: mean (n)",
                  "A − B [95% CI]", "p", "verdict"};
  table.numeric = {false, false, false, false, false, false, false, true, false};
  for (const ClaimComparison* c : comparisons) {
    const int places = DecimalsOf(c->claim->metric, decimals);
    table.rows.push_back({c->column, c->a_row, c->b_row, c->test, SideText(*c, true, places),
                          SideText(*c, false, places), EffectText(*c, places), PText(PValue(*c)),
                          VerdictText(c->verdict) + ": " + c->reason});
    const std::string pair = absl::StrCat(c->column, ", ", c->a_row, " vs ", c->b_row, ": ");
    if (!std::isnan(c->threshold)) {
      table.notes.push_back(pair + "steps to reach val loss " + FormatNumber(c->threshold, 4));
    }
    for (const std::string& sentence : ConfoundSentences(c->confounds)) {
      table.notes.push_back(pair + sentence);
    }
    if (!c->left_out.empty()) {
      table.notes.push_back(pair + "left out " + absl::StrJoin(c->left_out, "; "));
    }
  }
  return table;
}

// Verdict counts per claim, in claim order.
Table SummaryTable(const std::vector<ClaimComparison>& comparisons) {
  Table table;
  table.header = {"claim", "section", "comparisons", "supported", "contradicted", "inconclusive"};
  table.numeric = {false, false, true, true, true, true};
  std::vector<const Claim*> order;
  std::map<const Claim*, std::array<int, 3>> counts;
  for (const ClaimComparison& c : comparisons) {
    if (counts.count(c.claim) == 0) order.push_back(c.claim);
    ++counts[c.claim][static_cast<int>(c.verdict)];
  }
  for (const Claim* claim : order) {
    const std::array<int, 3>& n = counts[claim];
    table.rows.push_back({claim->id, claim->section, absl::StrCat(n[0] + n[1] + n[2]),
                          absl::StrCat(n[0]), absl::StrCat(n[1]), absl::StrCat(n[2])});
  }
  return table;
}

std::string Heading(const std::string& text, int level, Format format) {
  if (format == Format::kMarkdown) return std::string(level, '#') + " " + text + "\n\n";
  return text + "\n" + std::string(text.size() > 80 ? 80 : text.size(), level == 1 ? '=' : '-') +
         "\n\n";
}

}  // namespace

Table ClaimsRecords(const std::vector<ClaimComparison>& comparisons) {
  Table table;
  table.header = {"claim",    "section",    "words",      "column",    "a",        "b",
                  "metric",   "expect",     "test",       "n_a",       "n_b",      "mean_a",
                  "mean_b",   "effect",     "ci95_low",   "ci95_high", "t",        "df",
                  "p",        "diverged_a", "diverged_b", "threshold", "trials_a", "trials_b",
                  "values_a", "values_b",   "left_out",   "confounds", "verdict",  "reason"};
  table.numeric.assign(table.header.size(), false);
  for (size_t i = 9; i <= 21; ++i) table.numeric[i] = true;
  for (const ClaimComparison& c : comparisons) {
    const Claim& claim = *c.claim;
    const bool counts = claim.metric == ClaimMetric::kDivergences;
    const Difference& d = c.difference;
    table.rows.push_back({claim.id,
                          claim.section,
                          claim.words,
                          c.column,
                          c.a_row,
                          c.b_row,
                          MetricId(claim.metric),
                          Expect(claim),
                          c.test,
                          absl::StrCat(c.a_values.size()),
                          absl::StrCat(c.b_values.size()),
                          ExactNumber(c.mean_a),
                          ExactNumber(c.mean_b),
                          ExactNumber(d.mean),
                          ExactNumber(d.ci_low),
                          ExactNumber(d.ci_high),
                          ExactNumber(d.t),
                          ExactNumber(d.df),
                          ExactNumber(PValue(c)),
                          counts ? absl::StrCat(c.diverged_a) : "",
                          counts ? absl::StrCat(c.diverged_b) : "",
                          ExactNumber(c.threshold),
                          Joined(c.a_trials),
                          Joined(c.b_trials),
                          Joined(c.a_values),
                          Joined(c.b_values),
                          absl::StrJoin(c.left_out, "; "),
                          ConfoundField(c.confounds),
                          VerdictText(c.verdict),
                          c.reason});
  }
  return table;
}

std::string RenderClaims(const std::vector<ClaimComparison>& comparisons, Format format,
                         int decimals) {
  if (format == Format::kCsv || format == Format::kJson) {
    return Render(ClaimsRecords(comparisons), format);
  }
  std::string out = Heading("The paper's claims, tested", 1, format);
  if (comparisons.empty()) {
    out +=
        "No claim of the paper can be tested on these sweeps: no two rows of one setting "
        "form a pair that a claim compares.\n\n";
  } else {
    out += Render(SummaryTable(comparisons), format) + "\n";
  }
  for (size_t i = 0; i < comparisons.size();) {
    const Claim& claim = *comparisons[i].claim;
    std::vector<const ClaimComparison*> mine;
    for (; i < comparisons.size() && comparisons[i].claim == &claim; ++i) {
      mine.push_back(&comparisons[i]);
    }
    out += Heading(claim.id + " (" + claim.section + ")", 2, format);
    out += absl::StrCat(claim.words, "\n\nA: ", claim.a.name, "; B: ", claim.b.name, "; ",
                        MetricWords(claim.metric), "; the paper: ", Expect(claim), ".\n\n");
    out += Render(ClaimTable(mine, decimals), format) + "\n";
  }
  out += Heading("The verdict rule", 2, format);
  for (const std::string& line : VerdictRule()) out += "- " + line + "\n";
  return out;
}

}  // namespace spheret::client
