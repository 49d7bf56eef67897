#include "client/report/bounds.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/report/results.h"
#include "config/trial_config.h"
#include "protocol/metric_catalog.h"

namespace spheret::client {
namespace {

using Series = std::map<int64_t, double>;                               // step -> value
using LayerSeries = std::map<std::pair<int64_t, std::string>, Series>;  // (layer, sublayer) -> ...
struct TrialRows {
  TrialConfig config;
  std::map<std::string, LayerSeries> fields;
};

// The fields the table reads (Model, PerUpdateOf): only these are indexed, by step, so that a
// campaign's other per-layer fields (most of its values) cost no map nodes (issue 47).
bool Read(const std::string& field) {
  static const std::set<std::string> kRead = {
      protocol::kE2eSigmaMax, protocol::kE2eSigmaMinLower, protocol::kE2eSigmaMinUpper,
      protocol::kE2eSigmaMin, protocol::kBoundMax,         protocol::kBoundMin,
      protocol::kJacSigmaMax, protocol::kJacBoundMax,      protocol::kJacBoundMin};
  return kRead.count(field) != 0;
}

std::map<int64_t, TrialRows> Index(const std::map<std::string, std::vector<DiagSeries>>& by_field) {
  std::map<int64_t, TrialRows> trials;
  for (const auto& [field, series] : by_field) {
    if (!Read(field)) continue;
    for (const DiagSeries& one : series) {
      TrialRows& trial = trials[one.trial_id];
      trial.config = one.config;
      Series& into = trial.fields[field][{one.layer, one.sublayer}];
      for (size_t i = 0; i < one.steps.size() && i < one.values.size(); ++i) {
        if (std::isfinite(one.values[i])) into[one.steps[i]] = one.values[i];
      }
    }
  }
  return trials;
}

// The series of one row (empty when the row has none).
const Series& RowOf(const LayerSeries& rows, const std::pair<int64_t, std::string>& row) {
  static const Series kNone;
  auto found = rows.find(row);
  return found == rows.end() ? kNone : found->second;
}

// The model row's series of `field` (empty when the trial has none).
const Series& Model(const TrialRows& trial, const std::string& field) {
  static const Series kNone;
  auto found = trial.fields.find(field);
  if (found == trial.fields.end()) return kNone;
  return RowOf(found->second, {0, "model"});
}

std::optional<double> At(const Series& series, int64_t step) {
  auto found = series.find(step);
  return found == series.end() ? std::nullopt : std::optional<double>(found->second);
}

// The last step of `a` that `b` has too.
std::optional<int64_t> LastCommonStep(const Series& a, const Series& b) {
  for (auto it = a.rbegin(); it != a.rend(); ++it) {
    if (b.count(it->first)) return it->first;
  }
  return std::nullopt;
}

// G's values at the paired step, or (no pairing) sigma(G) at its last step and no bounds.
struct EndToEnd {
  bool has_bounds = false;      // a sphere method: Proposition 6 logged
  std::optional<int64_t> step;  // the paired step
  int64_t sigma_step = 0;       // the step of sigma(G): the paired one, else the last
  std::optional<double> sigma_max, bound_max, lower, upper, bound_min;
  std::optional<double> legacy;  // e2e_sigma_min of runs before the fp64 interval
};

EndToEnd EndToEndOf(const TrialRows& trial) {
  EndToEnd g;
  const Series& sigma_max = Model(trial, protocol::kE2eSigmaMax);
  g.has_bounds = !Model(trial, protocol::kBoundMax).empty();
  g.step = LastCommonStep(sigma_max, Model(trial, protocol::kBoundMax));
  const int64_t step = g.step.value_or(sigma_max.rbegin()->first);
  g.sigma_step = step;
  g.sigma_max = At(sigma_max, step);
  g.lower = At(Model(trial, protocol::kE2eSigmaMinLower), step);
  g.upper = At(Model(trial, protocol::kE2eSigmaMinUpper), step);
  g.legacy = At(Model(trial, protocol::kE2eSigmaMin), step);
  if (!g.step) return g;
  g.bound_max = At(Model(trial, protocol::kBoundMax), step);
  g.bound_min = At(Model(trial, protocol::kBoundMin), step);
  return g;
}

// Per update at the last jacobian step: the largest (1 + Delta_l) / sigma_max(J_l) and how many
// of the updates have m_l = 0.
struct PerUpdate {
  std::optional<int64_t> step;
  std::optional<double> worst_ratio;
  int zero_margins = 0, updates = 0;
};

PerUpdate PerUpdateOf(const TrialRows& trial) {
  PerUpdate out;
  auto sigma = trial.fields.find(protocol::kJacSigmaMax);
  auto bound = trial.fields.find(protocol::kJacBoundMax);
  auto margin = trial.fields.find(protocol::kJacBoundMin);
  if (sigma == trial.fields.end() || bound == trial.fields.end()) return out;
  for (const auto& [row, series] : sigma->second) {
    if (!series.empty()) out.step = std::max(out.step.value_or(0), series.rbegin()->first);
  }
  if (!out.step) return out;
  for (const auto& [row, series] : sigma->second) {
    const std::optional<double> s = At(series, *out.step);
    const std::optional<double> b = At(RowOf(bound->second, row), *out.step);
    if (!s || !b || *s <= 0) continue;
    ++out.updates;
    out.worst_ratio = std::max(out.worst_ratio.value_or(0), *b / *s);
    if (margin != trial.fields.end() && At(RowOf(margin->second, row), *out.step) == 0.0) {
      ++out.zero_margins;
    }
  }
  return out;
}

std::string Number(std::optional<double> value, bool exact) {
  if (!value) return "";
  return exact ? ExactNumber(*value) : absl::StrFormat("%.3g", *value);
}

std::optional<double> Ratio(std::optional<double> a, std::optional<double> b) {
  if (!a || !b || *b <= 0) return std::nullopt;
  return *a / *b;
}

// The plain sentence of one trial's G.
std::string EndToEndVerdict(const EndToEnd& g) {
  std::string out;
  if (!g.has_bounds) {
    out = "no Proposition 6 bounds (sphere methods only)";
  } else if (!g.step) {
    out =
        "no step logged both sigma(G) and the bounds, so none is compared (make "
        "jacobian_interval a multiple of diag_interval)";
  }
  if (const std::optional<double> r = Ratio(g.bound_max, g.sigma_max)) {
    out = *r > kVacuousRatio
              ? absl::StrFormat("exp(sum Delta) is %.3g times sigma_max(G): says nothing", *r)
              : absl::StrFormat("exp(sum Delta) is within %.3g times sigma_max(G)", *r);
  }
  std::string min;
  if (g.bound_min && *g.bound_min == 0) {
    min = "prod m_l = 0: says nothing";
  } else if (const std::optional<double> low = Ratio(g.lower, g.bound_min);
             low && *low > kVacuousRatio) {
    min = absl::StrFormat("prod m_l is below sigma_min(G) by at least %.3g: says nothing", *low);
  } else if (const std::optional<double> high = Ratio(g.upper, g.bound_min)) {
    min = *high <= kVacuousRatio
              ? absl::StrFormat("prod m_l is within %.3g of sigma_min(G)", *high)
              : "prod m_l against sigma_min(G) undetermined (sigma_min(G) has an upper bound "
                "only)";
  }
  if (!min.empty()) absl::StrAppend(&out, out.empty() ? "" : "; ", min);
  if (g.legacy && !g.upper) {
    absl::StrAppend(&out, out.empty() ? "" : "; ",
                    absl::StrFormat("sigma_min(G) read %.3g, an uncertified fp32 upper estimate "
                                    "that may read 0 (a run before the fp64 interval)",
                                    *g.legacy));
  }
  if (g.upper && g.lower.value_or(0) == 0) {
    absl::StrAppend(&out, out.empty() ? "" : "; ",
                    absl::StrFormat("sigma_min(G) <= %.3g (an upper bound; no lower bound "
                                    "certified)",
                                    *g.upper));
  }
  return out;
}

// The table's columns: a trial's row and scale, G's bounds beside sigma(G), the per-update ones.
Table BoundsHeader() {
  Table table;
  table.header = {"trial",
                  "row",
                  "scale",
                  "step",
                  "sigma_max(G) (lower estimate)",
                  "exp(sum Delta) (upper bound)",
                  "exp(sum Delta) / sigma_max(G)",
                  "sigma_min(G) lower bound",
                  "sigma_min(G) upper bound",
                  "prod m_l (lower bound)",
                  "sigma_min(G) upper / prod m_l",
                  "jacobian step",
                  "max (1 + Delta_l) / sigma_max(J_l)",
                  "updates with m_l = 0",
                  "what the bounds say"};
  table.numeric = {true, false, false, true, true, true,  true, true,
                   true, true,  true,  true, true, false, false};
  return table;
}

// The table of the indexed `trials` (BoundsTable).
Table TableOf(const std::map<int64_t, TrialRows>& trials, bool exact) {
  Table table = BoundsHeader();
  std::vector<int64_t> ids;
  std::vector<TrialConfig> configs;
  for (const auto& [id, trial] : trials) {
    if (Model(trial, protocol::kE2eSigmaMax).empty()) continue;
    ids.push_back(id);
    configs.push_back(trial.config);
  }
  const std::vector<TrialCell> cells = CellsOf(configs);
  for (size_t i = 0; i < ids.size(); ++i) {
    const TrialRows& trial = trials.at(ids[i]);
    const EndToEnd g = EndToEndOf(trial);
    const PerUpdate u = PerUpdateOf(trial);
    table.rows.push_back(
        {std::to_string(ids[i]), cells[i].row.label, cells[i].scale, std::to_string(g.sigma_step),
         Number(g.sigma_max, exact), Number(g.bound_max, exact),
         Number(Ratio(g.bound_max, g.sigma_max), exact), Number(g.lower, exact),
         Number(g.upper, exact), Number(g.bound_min, exact),
         Number(Ratio(g.upper, g.bound_min), exact), u.step ? std::to_string(*u.step) : "",
         Number(u.worst_ratio, exact),
         u.updates ? absl::StrCat(u.zero_margins, " of ", u.updates) : "", EndToEndVerdict(g)});
  }
  table.notes = {
      "exp(sum Delta) and prod m_l come from the diag steps (diag_interval), sigma(G) from the "
      "jacobian steps (jacobian_interval): `step` is the last step that has both (the bounds' "
      "columns stay empty when none has, and sigma(G) is its last); the per-update columns "
      "read the last jacobian step, where J_l and its bounds share the state.",
      absl::StrFormat(
          "sigma_max is a lower estimate (Krylov), so a ratio to it is an upper estimate; "
          "sigma_min(G) lies in [lower bound, upper bound] (a lower bound of 0: none "
          "certified). A bound \"says nothing\" when it is 0 (prod m_l) or stands more than "
          "%g times from the value it bounds.",
          kVacuousRatio)};
  return table;
}

}  // namespace

Table BoundsTable(const std::map<std::string, std::vector<DiagSeries>>& by_field, bool exact) {
  return TableOf(Index(by_field), exact);
}

BoundsTables BoundsTablesOf(const std::map<std::string, std::vector<DiagSeries>>& by_field) {
  const std::map<int64_t, TrialRows> trials = Index(by_field);
  return {TableOf(trials, /*exact=*/false), TableOf(trials, /*exact=*/true)};
}

}  // namespace spheret::client
