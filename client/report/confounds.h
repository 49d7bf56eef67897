// Confounds: what else differs between the rows that a table, figure or comparison puts side by
// side. A row is meant to differ from the others in its identity (method, p) only; any other knob
// whose effective value differs between the rows of one column is a confound, and the outputs
// must say so ("rows also differ in scalenorm: on for ...; off for ..."). Computed from the
// trials' effective configs (the trainer's resolution, defaults included), for any knob, with no
// list of known knobs. Pure: no I/O.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "config/method_registry.h"
#include "config/trial_config.h"

namespace spheret::client {

// One trial as a comparison places it.
struct ConfoundTrial {
  std::string row;     // the row's name as the output prints it (`GeoNorm`, `scripted:rezero`)
  std::string column;  // what the rows are compared within (data set and scale)
  const nlohmann::json* config = nullptr;  // its stored config's object (TrialConfig::object)
};

// One value of a confounded key and the rows that have it (in the order of the trials given).
struct ConfoundValue {
  std::string text;  // KnobValueText, booleans as "on"/"off", "unset" when a config lacks the key
  std::vector<std::string> rows;
};

// A key whose value differs between rows of one column.
struct Confound {
  std::string key;
  std::vector<ConfoundValue> values;  // in order of first appearance
};

// The row identity of every comparison: the method, p (p_spheret's row), the seed (the repeat a
// row aggregates over) and a scripted method's connection file (its row, RowMethodOf).
inline const std::set<std::string>& DefaultIdentityKeys() {
  static const std::set<std::string> kKeys = [] {
    std::set<std::string> keys = {"method", "p", "seed"};
    keys.insert(ConnectionIdentityKeys().begin(), ConnectionIdentityKeys().end());
    return keys;
  }();
  return kKeys;
}

// The effective config of a trial's stored config object: ConfigToJson of its resolution (as
// TrialConfig::Resolve resolves); when this version refuses the config, its known keys resolved
// with the unknown ones added as stored (or, when even those are refused, the trainer's defaults
// under the stored keys).
nlohmann::json EffectiveConfig(const nlohmann::json& config);

// The keys outside `identity_keys` whose effective values differ between the rows of some
// column: a key is confounded in a column when two of its rows take different sets of values
// over their trials. Values are listed over the columns where the key is confounded. In key order.
std::vector<Confound> FindConfounds(
    const std::vector<ConfoundTrial>& trials,
    const std::set<std::string>& identity_keys = DefaultIdentityKeys());

// "rows also differ in scalenorm: on for p-SpheretNorm (p=0.5), p-SpheretNorm (p=2); off for
// Pre-LN, GeoNorm", one per confound.
std::string ConfoundSentence(const Confound& confound);
std::vector<std::string> ConfoundSentences(const std::vector<Confound>& confounds);
// The confounds as one field of a CSV or JSON record, keys apart by " | ", values by "; ":
// "scalenorm: on (A, B); off (C) | weight_decay: 0.1 (A); 0.05 (B, C)"; "" when none.
std::string ConfoundField(const std::vector<Confound>& confounds);

}  // namespace spheret::client
