// Proposition 6's bounds beside what they bound (docs/methods.md §2), per trial, from the
// trainer's diag rows: exp(sum Delta_l) against sigma_max(G) and prod m_l against sigma_min(G),
// with their ratios and a plain sentence when a bound says nothing; per update, 1 + Delta_l
// against sigma_max(J_l) and how many m_l are 0. Pure.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "client/report/geometry.h"
#include "client/report/table.h"

namespace spheret::client {

// A bound is vacuous when it stands more than this factor from the value it bounds (or is 0 as
// a lower bound).
inline constexpr double kVacuousRatio = 1e3;

// One row per trial that logged the end-to-end Jacobian (`by_field` as WriteGeometry fetches
// DiagFields()). bound_max and bound_min come from the diag steps (diag_interval), sigma(G) and
// the per-update values from the jacobian steps (jacobian_interval): G's columns pair them at
// the last step that has both (empty, and said so, when none has); the per-update columns read
// the last jacobian step, where J_l and its bounds come from the same state. sigma_max is a
// lower estimate, so bound_max / sigma_max(G) is an upper estimate of the true ratio;
// sigma_min(G) is the interval [e2e_sigma_min_lower, e2e_sigma_min_upper] and its ratio to
// prod m_l uses the upper end (runs before it logged e2e_sigma_min, an uncertified fp32 estimate:
// only the sentence quotes it, as that). `exact`: numbers at full precision (CSV, JSON), else 3
// significant digits. The notes say how the steps pair and what "says nothing" means.
Table BoundsTable(const std::map<std::string, std::vector<DiagSeries>>& by_field, bool exact);

// Both of BoundsTable's tables from one index of `by_field` (a report writes both: 3 significant
// digits beside the geometry table, full precision in geometry_bounds.csv/json).
struct BoundsTables {
  Table shown;  // exact = false
  Table exact;  // exact = true
};
BoundsTables BoundsTablesOf(const std::map<std::string, std::vector<DiagSeries>>& by_field);

}  // namespace spheret::client
