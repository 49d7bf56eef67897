// The method registry: every fact about a deep-connection method, declared once
// (method_registry.cc, one `MethodSpec` a method in one table).
//
// A method's id, its family, its names in the reports, its rows in the paper's tables, the
// connection knobs it reads (and which of them are linked: the angle cap, the first-layer
// ScaleNorm, the step-size decay) and the per-layer diagnostics it records. The trainer's knob
// spellings (`KnobSpellings<Method>`), the sweep's checks, the reports' rows and labels and the
// knob table of docs/methods.md read it; no other file outside worker/nn compares a method's name
// to a string literal (scripts/check_layout.py counts them). docs/methods.md, "Adding a built-in
// method", walks through a new entry. Torch-free; everything here is immutable after first use and
// safe to read from any thread.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "config/connection_options.h"

namespace spheret {

// Residual: h + something (the Euclidean baselines, AutoNorm); sphere: the norm-preserving
// updates of docs/methods.md §2 (GeoNorm and the SpheretNorm family); other: nGPT and a
// researcher's TorchScript connection.
enum class MethodFamily { kResidual, kSphere, kOther };

// When the angle cap `angle_max` acts on the update: never, always, or only for p > 1 (p_spheret).
enum class CapRule { kNever, kAlways, kWhenPAboveOne };

// A row of the paper's tables (Tables 2-5): its name there and, for p_spheret, its p.
struct PaperRowSpec {
  std::string_view name;
  std::optional<double> p;
};

// A connection knob as configs spell it: its type, the values it takes and its default, as
// ValidateConnectionOptions and train_config_checks.cc enforce them.
struct KnobSpec {
  std::string_view name;
  std::string_view type;  // "number", "bool" or "enum"
  std::string range;      // the valid values (an enum's spellings, a number's range)
  std::string fallback;   // the default ("the method's" where the method decides)
};

struct MethodSpec {
  Method method = Method::kPreLn;
  std::string_view id;  // as configs spell it: "pre_ln"
  MethodFamily family = MethodFamily::kOther;
  std::string_view label;  // the paper's name, as the claims and Tables 2-5 print it: "Pre-LN"
  // Its rows in the paper's tables, in their order (empty: not one of the paper's methods).
  std::vector<PaperRowSpec> paper_rows;
  // The p_spheret row it stands for in the paper's numbers: proj_spheret is p = 1, cay_spheret
  // p = 2 (docs/methods.md: the same update).
  std::optional<double> as_p_spheret;
  std::vector<std::string_view> knobs;  // the connection knobs it reads (KnobSpecs' names)
  CapRule cap = CapRule::kNever;
  bool scalenorm_default = false;  // §4.2: the first-layer ScaleNorm is on unless set
  bool decays = false;             // its step size decays over depth (decay, decay_index)
  std::vector<std::string_view> diagnostics;  // the diag fields its trainer records
  // The reports print "n/a" (not "—") where it records no value of a diagnostic it lacks.
  // False for the methods whose tables printed "—" before the registry (their outputs stay).
  bool marks_not_applicable = false;
};

// Every method, in the paper's order (Table 2: the Euclidean baselines, then the sphere family),
// then the related methods and `scripted`. The order of MethodIds() and of the reports' rows.
const std::vector<MethodSpec>& MethodRegistry();
// The spec of `method` (every enum value has one).
const MethodSpec& SpecOf(Method method);
// The spec of the method spelled `id`, or nullptr.
const MethodSpec* FindMethodSpec(std::string_view id);
// The connection knobs, in docs/methods.md's order.
const std::vector<KnobSpec>& ConnectionKnobs();

// The method a trial's config names ("method", default pre_ln as the trainer's), as its id.
std::string MethodIdOf(const nlohmann::json& config);
// The ids of `methods`, as a set (a report's roles).
std::set<std::string> MethodIdSet(const std::vector<Method>& methods);
// The ids of the methods that read `knob` ("p" -> {p_spheret}), in registry order.
std::vector<std::string> MethodsReading(std::string_view knob);
// Whether the method spelled `id` reads `knob`; false for an unknown id.
bool MethodReads(std::string_view id, std::string_view knob);
// Whether the angle cap acts on the update of the method spelled `id` at `p`.
bool CapActs(std::string_view id, double p);
// Whether the method spelled `id` records the diag field `field`; false for an unknown id.
bool MethodRecords(std::string_view id, std::string_view field);
// Whether the method spelled `id` prints "n/a" for the diagnostics it lacks.
bool MarksNotApplicable(std::string_view id);

// The trial's row in the reports: the method's id, or for `scripted` "scripted:STEM@HASH" with the
// stem of its `connection` file and the first 8 hex digits of its connection_sha256
// ("examples/connections/rezero.pt" -> "scripted:rezero@6b918467"; without a hash,
// "scripted:rezero"), so that each connection file, and each version of one, is a row of its own. The one rule for results, paper tables, claims,
// geometry and confounds.
std::string RowMethodOf(const nlohmann::json& config);
// The config keys that name a scripted trial's connection: part of a row's identity, never a
// confound between rows.
const std::vector<std::string>& ConnectionIdentityKeys();

// The knob table of docs/methods.md ("Knobs by method"), as Markdown: one row a knob (type,
// range, default, the methods that read it).
std::string KnobTableMarkdown();
// The method table beside it: family, label, and the linked knobs (angle cap, first-layer
// ScaleNorm's default, step-size decay).
std::string MethodTableMarkdown();

}  // namespace spheret
