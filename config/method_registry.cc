#include "config/method_registry.h"

#include <algorithm>
#include <stdexcept>

#include "absl/strings/str_join.h"
#include "config/connection_script.h"
#include "config/knob_text.h"
#include "config/train_config_checks.h"
#include "protocol/metric_catalog.h"

namespace spheret {
namespace {

using View = std::vector<std::string_view>;

MethodSpec Spec(Method method, std::string_view id, MethodFamily family, std::string_view label) {
  MethodSpec spec;
  spec.method = method;
  spec.id = id;
  spec.family = family;
  spec.label = label;
  return spec;
}

// The knobs every sphere update reads (docs/methods.md §2): step size, its decay, the inner norm,
// the first-layer ScaleNorm and its radius, the fused kernel.
View SphereKnobs(View more) {
  View knobs = {"decay",      "decay_index", "step_param", "radius_param",
                "inner_norm", "scalenorm",   "fused"};
  knobs.insert(knobs.begin(), more.begin(), more.end());
  return knobs;
}

// Diagnostics by who records them (worker/train/diagnostics.cc, worker/nn): every connection,
// the sphere updates (step size, θ², the share at the cap, Proposition 6's values), AutoNorm's
// gate.
View Generic() {
  return {protocol::kHiddenNorm,       protocol::kTheta,
          protocol::kRadial,           protocol::kTokenCos,
          protocol::kEffRank,          protocol::kJacSigmaMax,
          protocol::kJacSigmaMinUpper, protocol::kJacSigmaMinLower,
          protocol::kE2eSigmaMax,      protocol::kE2eSigmaMinUpper,
          protocol::kE2eSigmaMinLower};
}
View SphereOnly() {
  return {protocol::kAlpha,       protocol::kTheta2,    protocol::kAtCap,
          protocol::kBNorm,       protocol::kEta,       protocol::kDelta,
          protocol::kMargin,      protocol::kMinAbsCos, protocol::kJacBoundMax,
          protocol::kJacBoundMin, protocol::kDeltaSum,  protocol::kTheta2Sum,
          protocol::kBoundMax,    protocol::kBoundMin,  protocol::kTheta2Budget};
}
View Plus(View a, const View& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

MethodSpec Residual(Method method, std::string_view id, std::string_view label, View knobs = {}) {
  MethodSpec spec = Spec(method, id, MethodFamily::kResidual, label);
  spec.knobs = std::move(knobs);
  spec.diagnostics = Generic();
  return spec;
}

MethodSpec Sphere(Method method, std::string_view id, std::string_view label, CapRule cap,
                  View extra_knobs) {
  MethodSpec spec = Spec(method, id, MethodFamily::kSphere, label);
  spec.knobs = SphereKnobs(std::move(extra_knobs));
  spec.cap = cap;
  spec.scalenorm_default = true;  // §4.2: "for all three types of SpheretNorm"
  spec.decays = true;
  spec.diagnostics = Plus(Generic(), SphereOnly());
  return spec;
}

// An enum knob: its values are its spellings (KnobSpellings), its default the options'.
template <typename Enum>
KnobSpec EnumKnob(std::string_view name, Enum fallback) {
  std::vector<std::string> values;
  for (const auto& [spelled, value] : KnobSpellings<Enum>()) values.emplace_back(spelled);
  return {name, "enum", absl::StrJoin(values, ", "), std::string(KnobId(fallback))};
}

MethodSpec InPaper(MethodSpec spec, std::vector<PaperRowSpec> rows) {
  spec.paper_rows = std::move(rows);
  return spec;
}

// The one table. Its order is the paper's (Table 2), then the related methods.
std::vector<MethodSpec> BuildRegistry() {
  std::vector<MethodSpec> specs;
  specs.push_back(InPaper(Residual(Method::kPreLn, "pre_ln", "Pre-LN"), {{"Pre-LN", {}}}));
  specs.push_back(Residual(Method::kPostLn, "post_ln", "Post-LN"));
  specs.push_back(InPaper(Residual(Method::kPreDyt, "pre_dyt", "Pre-DyT", {"dyt_alpha_init"}),
                          {{"Pre-DyT", {}}}));
  specs.push_back(InPaper(Residual(Method::kPeriLn, "peri_ln", "Peri-LN"), {{"Peri-LN", {}}}));
  specs.push_back(InPaper(Residual(Method::kKeel, "keel", "Keel"), {{"Keel", {}}}));
  MethodSpec geonorm =
      Sphere(Method::kGeoNorm, "geonorm", "GeoNorm", CapRule::kAlways, {"angle_max"});
  geonorm.scalenorm_default = false;  // the paper's baseline: Eq. 3 has none
  specs.push_back(InPaper(geonorm, {{"GeoNorm", {}}}));
  specs.push_back(
      Sphere(Method::kProjSpheret, "proj_spheret", "Proj-SpheretNorm", CapRule::kNever, {}));
  specs.back().as_p_spheret = 1.0;
  specs.push_back(Sphere(Method::kCaySpheret, "cay_spheret", "Cay-SpheretNorm", CapRule::kAlways,
                         {"angle_max"}));
  specs.back().as_p_spheret = 2.0;
  specs.push_back(InPaper(Sphere(Method::kPSpheret, "p_spheret", "p-SpheretNorm",
                                 CapRule::kWhenPAboveOne, {"p", "angle_max"}),
                          {{"p-SpheretNorm (p=0.5)", 0.5},
                           {"p-SpheretNorm (p=1)", 1.0},
                           {"p-SpheretNorm (p=2)", 2.0}}));
  MethodSpec ngpt = Spec(Method::kNgpt, "ngpt", MethodFamily::kOther, "nGPT");
  ngpt.knobs = {"ngpt_alpha_init"};
  ngpt.diagnostics = Generic();
  specs.push_back(ngpt);
  specs.push_back(
      Residual(Method::kAutoNorm, "autonorm", "AutoNorm", {"autonorm_mode", "dyt_alpha_init"}));
  specs.back().diagnostics = Plus(Generic(), {protocol::kGateChoice, protocol::kGateProb});
  MethodSpec scripted = Spec(Method::kScripted, "scripted", MethodFamily::kOther, "scripted");
  scripted.knobs = {"connection"};
  scripted.diagnostics = Generic();
  scripted.marks_not_applicable = true;
  specs.push_back(scripted);
  return specs;
}

}  // namespace

const std::vector<MethodSpec>& MethodRegistry() {
  static const std::vector<MethodSpec> specs = BuildRegistry();
  return specs;
}

const MethodSpec& SpecOf(Method method) {
  for (const MethodSpec& spec : MethodRegistry()) {
    if (spec.method == method) return spec;
  }
  // Unreachable while every enum value has its entry (MethodRegistryTest checks each one).
  throw std::logic_error("method registry: no entry for a Method value");
}

const MethodSpec* FindMethodSpec(std::string_view id) {
  for (const MethodSpec& spec : MethodRegistry()) {
    if (spec.id == id) return &spec;
  }
  return nullptr;
}

const std::vector<KnobSpec>& ConnectionKnobs() {
  const ConnectionOptions fallback;  // the defaults
  const auto open_range = [](double max) { return "(0, " + NumberText(max) + "]"; };
  static const std::vector<KnobSpec> knobs = {
      {"p", "number", open_range(kMaxP), NumberText(fallback.p)},
      {"angle_max", "number", "(0, π/2] radians, or none", "π/4"},
      EnumKnob("decay", fallback.decay),
      EnumKnob("decay_index", fallback.decay_index),
      EnumKnob("step_param", fallback.step_param),
      EnumKnob("radius_param", fallback.radius_param),
      EnumKnob("inner_norm", fallback.inner_norm),
      {"scalenorm", "bool", "true, false", "the method's"},
      {"fused", "bool", "true, false", fallback.fused ? "true" : "false"},
      {"dyt_alpha_init", "number", "finite", NumberText(fallback.dyt_alpha_init)},
      {"ngpt_alpha_init", "number", open_range(kMaxAlphaInit),
       NumberText(fallback.ngpt_alpha_init)},
      EnumKnob("autonorm_mode", fallback.autonorm_mode),
      {"connection", "text", "a TorchScript file (docs/connections.md)", "none"},
  };
  return knobs;
}

std::string MethodIdOf(const nlohmann::json& config) {
  const auto method = config.is_object() ? config.find("method") : config.end();
  if (!config.is_object() || method == config.end()) {
    return std::string(MethodId(ConnectionOptions{}.method));  // the trainer's default
  }
  return method->is_string() ? method->get<std::string>() : method->dump();
}

std::set<std::string> MethodIdSet(const std::vector<Method>& methods) {
  std::set<std::string> ids;
  for (Method method : methods) ids.emplace(SpecOf(method).id);
  return ids;
}

std::vector<std::string> MethodsReading(std::string_view knob) {
  std::vector<std::string> ids;
  for (const MethodSpec& spec : MethodRegistry()) {
    if (std::find(spec.knobs.begin(), spec.knobs.end(), knob) != spec.knobs.end()) {
      ids.emplace_back(spec.id);
    }
  }
  return ids;
}

bool MethodReads(std::string_view id, std::string_view knob) {
  const MethodSpec* spec = FindMethodSpec(id);
  return spec != nullptr &&
         std::find(spec->knobs.begin(), spec->knobs.end(), knob) != spec->knobs.end();
}

bool CapActs(std::string_view id, double p) {
  const MethodSpec* spec = FindMethodSpec(id);
  if (spec == nullptr) return false;
  return spec->cap == CapRule::kAlways || (spec->cap == CapRule::kWhenPAboveOne && p > 1.0);
}

bool MethodRecords(std::string_view id, std::string_view field) {
  const MethodSpec* spec = FindMethodSpec(id);
  return spec != nullptr && std::find(spec->diagnostics.begin(), spec->diagnostics.end(), field) !=
                                spec->diagnostics.end();
}

bool MarksNotApplicable(std::string_view id) {
  const MethodSpec* spec = FindMethodSpec(id);
  return spec != nullptr && spec->marks_not_applicable;
}

std::string RowMethodOf(const nlohmann::json& config) {
  const std::string id = MethodIdOf(config);
  if (id != SpecOf(Method::kScripted).id) return id;
  const auto file = config.find("connection");
  if (file == config.end() || !file->is_string()) return id;
  std::string row = id + ":" + ConnectionStem(file->get<std::string>());
  // Two versions of one file (edited and submitted again into the same sweep) are two rows.
  const auto sha = config.find("connection_sha256");
  if (sha != config.end() && sha->is_string() && sha->get<std::string>().size() >= 8) {
    row += "@" + sha->get<std::string>().substr(0, 8);
  }
  return row;
}

const std::vector<std::string>& ConnectionIdentityKeys() {
  static const std::vector<std::string> keys = {"connection", "connection_sha256",
                                                "connection_script"};
  return keys;
}

std::string KnobTableMarkdown() {
  std::string out = "| knob | type | values | default | read by |\n|---|---|---|---|---|\n";
  for (const KnobSpec& knob : ConnectionKnobs()) {
    std::vector<std::string> readers;
    for (const std::string& id : MethodsReading(knob.name)) readers.push_back("`" + id + "`");
    out += "| `" + std::string(knob.name) + "` | " + std::string(knob.type) + " | " + knob.range +
           " | " + knob.fallback + " | " + absl::StrJoin(readers, ", ") + " |\n";
  }
  return out;
}

std::string MethodTableMarkdown() {
  static const char* kFamilies[] = {"residual", "sphere", "other"};
  static const char* kCaps[] = {"no", "yes", "p > 1"};
  std::string out =
      "| method | family | label | angle cap | ScaleNorm default | decay |\n"
      "|---|---|---|---|---|---|\n";
  for (const MethodSpec& spec : MethodRegistry()) {
    out += "| `" + std::string(spec.id) + "` | " + kFamilies[static_cast<int>(spec.family)] +
           " | " + std::string(spec.label) + " | " + kCaps[static_cast<int>(spec.cap)] + " | " +
           (spec.scalenorm_default ? "on" : "off") + " | " + (spec.decays ? "yes" : "no") + " |\n";
  }
  return out;
}

}  // namespace spheret
