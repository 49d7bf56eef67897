#include "client/report/claims_rows.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "client/report/confounds.h"
#include "config/connection_options.h"
#include "config/knob_text.h"
#include "config/method_registry.h"

namespace spheret::client::claim_rows {
namespace {

using nlohmann::json;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kQuarterPi = 0.78539816339744830962;

int64_t SeedOf(const json& config) {
  auto seed = config.find("seed");
  return seed != config.end() && seed->is_number_integer() ? seed->get<int64_t>() : 1337;
}

// The effective config without the keys in `skip`, as text to compare.
std::string Signature(const json& config, const std::set<std::string>& skip) {
  json rest = config;
  for (const std::string& key : skip) rest.erase(key);
  return rest.dump();
}

// The row's method and p as `results` labels them (`pre_ln`, `p_spheret p=0.5`,
// `scripted:rezero`).
std::string BaseLabel(const json& config) {
  std::string label = RowMethodOf(config);
  auto p = config.find("p");
  if (MethodReads(label, "p") && p != config.end() && p->is_number()) {
    label += " p=" + FormatP(p->get<double>());
  }
  return label;
}

// The keys a row's config is compared by: all but the seed and a scripted method's connection
// keys, which its base label (RowMethodOf) stands for.
const std::set<std::string>& NotCompared() {
  static const std::set<std::string> keys = [] {
    std::set<std::string> all(ConnectionIdentityKeys().begin(), ConnectionIdentityKeys().end());
    all.insert("seed");
    return all;
  }();
  return keys;
}

std::string ValueText(const json& value) {
  if (value.is_boolean()) return value.get<bool>() ? "on" : "off";
  return KnobValueText(value);
}

// The column of a config: its scale, after its data set when the trials span several.
std::string ColumnOf(const json& config, bool several_datasets) {
  const std::string scale = config.value("scale", std::string("custom"));
  const std::string scale_text = scale.empty() ? "custom" : scale;
  return several_datasets ? config.value("dataset", std::string()) + " " + scale_text : scale_text;
}

// Labels the rows: the base label, then each key whose value differs between the rows of the
// same base label and column ("p_spheret p=1 scalenorm=off"), then "[sweep]" for repeats.
void LabelRows(std::vector<Row>* rows, const std::vector<std::string>& sweeps) {
  std::map<std::string, std::vector<Row*>> alike;  // column | base -> rows
  for (Row& row : *rows) alike[row.column + "\x1f" + BaseLabel(row.config)].push_back(&row);
  for (auto& [key, group] : alike) {
    std::set<std::string> differing;
    for (const Row* row : group) {
      for (auto it = row->config.begin(); it != row->config.end(); ++it) {
        if (NotCompared().count(it.key()) != 0) continue;
        for (const Row* other : group) {
          auto found = other->config.find(it.key());
          if (found == other->config.end() || *found != it.value()) differing.insert(it.key());
        }
      }
    }
    for (Row* row : group) {
      row->label = BaseLabel(row->config);
      for (const std::string& name : differing) {
        auto value = row->config.find(name);
        if (value != row->config.end()) row->label += " " + name + "=" + ValueText(*value);
      }
    }
  }
  for (size_t r = 0; r < rows->size(); ++r) {
    if (!sweeps[r].empty()) (*rows)[r].label += " [" + sweeps[r] + "]";
  }
}

// Groups trials into rows by column and effective config. A config repeated in several sweeps
// with a seed in common stays one row per sweep ("label [sweep]"): repeats are not seeds.
Rows GroupRows(const std::vector<ClaimTrial>& trials) {
  Rows out;
  std::vector<json> effective;
  std::set<std::string> datasets;
  for (const ClaimTrial& trial : trials) {
    effective.push_back(EffectiveConfig(trial.result.config.object()));
    out.seeds.push_back(SeedOf(effective.back()));
    datasets.insert(effective.back().value("dataset", std::string()));
  }
  std::map<std::string, std::vector<size_t>> groups;  // column | signature -> trials
  for (size_t i = 0; i < trials.size(); ++i) {
    groups[ColumnOf(effective[i], datasets.size() > 1) + "\x1f" + BaseLabel(effective[i]) + "\x1f" +
           Signature(effective[i], NotCompared())]
        .push_back(i);
  }
  std::vector<std::string> row_sweeps;  // the sweep of a repeat's row, else ""
  for (auto& [key, members] : groups) {
    std::map<int64_t, std::set<std::string>> sweeps_of_seed;
    for (size_t i : members) sweeps_of_seed[out.seeds[i]].insert(trials[i].sweep);
    bool repeated = false;
    for (const auto& [seed, sweeps] : sweeps_of_seed) repeated |= sweeps.size() > 1;
    std::map<std::string, Row> split;
    for (size_t i : members) {
      Row& row = split[repeated ? trials[i].sweep : ""];
      row.column = ColumnOf(effective[i], datasets.size() > 1);
      row.config = effective[i];
      row.trials.push_back(i);
    }
    for (auto& [sweep, row] : split) {
      std::stable_sort(row.trials.begin(), row.trials.end(),
                       [&](size_t x, size_t y) { return out.seeds[x] < out.seeds[y]; });
      out.rows.push_back(std::move(row));
      row_sweeps.push_back(sweep);
    }
  }
  LabelRows(&out.rows, row_sweeps);
  return out;
}

std::string MethodOf(const json& config) { return MethodIdOf(config); }

// The effective angle_max (the trainer's default π/4 when a config that could not be resolved
// lacks it); "none" is +inf.
bool AngleIs(const json& config, AngleCap cap) {
  auto angle = config.find("angle_max");
  const bool none = angle != config.end() && angle->is_string() && *angle == "none";
  const double value = angle == config.end() ? kQuarterPi
                       : angle->is_number()  ? angle->get<double>()
                                             : kNaN;
  switch (cap) {
    case AngleCap::kAny:
      return true;
    case AngleCap::kNone:
      return none;
    case AngleCap::kFinite:
      return std::isfinite(value);
    case AngleCap::kQuarterPi:
      return std::fabs(value - kQuarterPi) < 1e-9;
    case AngleCap::kHalfPi:
      return std::fabs(value - 2 * kQuarterPi) < 1e-9;
  }
  return false;
}

// ScaleNorm as §4.2 gives it to the config's method (ScaleNormOn's default).
bool PaperScaleNorm(const json& config) {
  ConnectionOptions options;
  const std::optional<Method> method = ParseMethod(MethodOf(config));
  if (method) options.method = *method;
  return ScaleNormOn(options);
}

// The effective scalenorm (the method's default when a config lacks it).
bool ScaleNormOf(const json& config) {
  auto scalenorm = config.find("scalenorm");
  if (scalenorm != config.end() && scalenorm->is_boolean()) return scalenorm->get<bool>();
  return PaperScaleNorm(config);
}

// Whether the row's update reads angle_max (docs/methods.md §2; the registry's CapRule).
bool CapActsOn(const json& config) {
  auto p = config.find("p");
  return CapActs(MethodOf(config), p != config.end() && p->is_number() ? p->get<double>() : 1.0);
}

bool PlaysRole(const RowRole& role, const json& config) {
  if (!role.methods.empty() && role.methods.count(MethodOf(config)) == 0) return false;
  if (role.capped_method && !CapActsOn(config)) return false;
  if (!AngleIs(config, role.angle_max)) return false;
  return !role.scalenorm || ScaleNormOf(config) == *role.scalenorm;
}

// angle_max π/4 and ScaleNorm as §4.2 gives it to the row's method.
bool AtPaperSettings(const json& config) {
  return AngleIs(config, AngleCap::kQuarterPi) && ScaleNormOf(config) == PaperScaleNorm(config);
}

bool PairsRows(const Claim& claim, const Row& a, const Row& b) {
  if (claim.pairing == Pairing::kPaperSettings) {
    return AtPaperSettings(a.config) && AtPaperSettings(b.config);
  }
  std::set<std::string> skip = claim.varied;
  skip.insert("seed");
  return Signature(a.config, skip) == Signature(b.config, skip);
}

// Rows in the paper's method order within a column, then p, then label.
bool RowBefore(const Row& x, const Row& y) {
  static const std::vector<std::string> kOrder = MethodIds();
  const auto rank = [](const Row& row) {
    const auto at = std::find(kOrder.begin(), kOrder.end(), MethodOf(row.config));
    const auto p = row.config.find("p");
    return std::make_tuple(row.column, at - kOrder.begin(),
                           p != row.config.end() && p->is_number() ? p->get<double>() : 0.0,
                           row.label);
  };
  return rank(x) < rank(y);
}

}  // namespace

Rows BuildRows(const std::vector<ClaimTrial>& trials) {
  Rows rows = GroupRows(trials);
  std::sort(rows.rows.begin(), rows.rows.end(), RowBefore);
  return rows;
}

bool Plays(const RowRole& role, const json& config) { return PlaysRole(role, config); }

bool Pairs(const Claim& claim, const Row& a, const Row& b) { return PairsRows(claim, a, b); }

}  // namespace spheret::client::claim_rows
