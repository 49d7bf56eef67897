// The rules of the per-layer values a trainer reports in its `diag` events
// (protocol/trainer_events.h): where a row sits (its layer and sublayer), how its fields are named
// and how many it may carry. The worker checks them when it parses a trainer's line, and the
// coordinator again when it receives a row, so every stored field name is short and plain and
// every layer is bounded. Plain character tests, no std::regex: the text is untrusted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace spheret::protocol {

// The sublayers of a diag row and the layers each admits.
inline constexpr char kAttnSublayer[] = "attn";    // layer l in [1, kMaxDiagLayer]: 1-based depth
inline constexpr char kMlpSublayer[] = "mlp";      //   over the loops of a looped model
inline constexpr char kModelSublayer[] = "model";  // layer 0: whole-model values of the step
// Layer m in [1, 2 * kMaxDiagLayer]: a dyadic budget over the sublayer updates m, ..., 2m - 1.
inline constexpr char kDyadicSublayer[] = "dyadic";

inline constexpr int64_t kMaxDiagLayer = 4096;
inline constexpr size_t kMaxDiagValues = 64;       // fields per row
inline constexpr size_t kMaxDiagFieldLength = 40;  // characters of a field name

// A row's values: (field, value) pairs with unique field names; NaN where a value was not finite.
using DiagValues = std::vector<std::pair<std::string, double>>;

// What the number of a field is where it is not simply the measured value, for every output that
// shows it (report columns, plot axes, dashboards) to print beside it; "" for any other field.
// The Jacobians' singular values (worker/nn/jacobian.h, fp64, on one sequence) are one-sided:
//   jac_sigma_max, e2e_sigma_max   "lower estimate of sigma_max(J_l)" / "...(G)" (Krylov)
//   jac_sigma_min_upper, e2e_...   "upper bound on sigma_min(J_l)" / "...(G)"
//   jac_sigma_min_lower, e2e_...   "lower bound on sigma_min(...) (0: not certified)": nonzero
//                                  only when the Krylov space spanned all T C dimensions
//   jac_sigma_min, e2e_sigma_min   runs before the fp64 measurement: an uncertified fp32 upper
//                                  estimate that may read 0 below the truth
// and Proposition 6's values are bounds, often vacuous: jac_bound_max (1 + Delta_l >= sigma_max
// of J_l), jac_bound_min (m_l <= sigma_min of J_l), bound_max (exp(sum Delta) >= sigma_max(G)),
// bound_min (prod m_l <= sigma_min(G)).
std::string_view DiagFieldReading(std::string_view field);

// Whether `sublayer` is attn, mlp, model or dyadic.
bool IsDiagSublayer(std::string_view sublayer);

// Whether `name` is 1 to kMaxDiagFieldLength characters of [a-z0-9_].
bool IsDiagFieldName(std::string_view name);

// "" when (layer, sublayer, values) is a valid diag row, else why, naming the field at fault:
// "field 'layer' must be in [1, 4096] for sublayer attn, got 0", "field 'values' has a field
// name that is not 1 to 40 of [a-z0-9_]: \"Theta\"", "field 'values' has 65 fields, at most 64",
// "field 'values' names 'theta' twice".
std::string DiagRowError(int64_t layer, std::string_view sublayer, const DiagValues& values);

// Whether a diag row at `layer` of `sublayer` belongs to a model `depth` deep: attn and mlp layers
// in [1, depth], model layer 0, dyadic layers in [1, 2 depth]; never when `depth` is 0 (unknown).
// What bounds the per-layer values a trial's worker may store and export, and which rows the
// reports and plots read (server/sweep/trial_depth.h resolves a trial's depth).
bool DiagRowWithinDepth(int64_t depth, int64_t layer, std::string_view sublayer);

}  // namespace spheret::protocol
