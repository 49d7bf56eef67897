// Replays reports through server/sched/rungs.h's RungBoard and prints what it decided, for
// asha_optuna_test.py to hold against Optuna's SuccessiveHalvingPruner. Reads a JSON list of
// cases on stdin: {"min_iters", "reduction_factor", "minimize", "reports": [[trial, step, value],
// ...]}, a value being a number, or "nan" or null for NaN (JSON has no NaN). Prints, per case, an
// object keyed by trial: {"stop_step": the step of the report that stopped it, or null; "rung":
// the rungs it completed after its last report; "values": the value it recorded at each rung}.
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "server/sched/rungs.h"

using nlohmann::json;
using spheret::sched::RungBoard;
using spheret::sched::RungRule;
using spheret::sched::RungVerdict;

namespace {

// What the coordinator keeps of one trial between its reports.
struct TrialState {
  int rung = 0;
  bool stopped = false;
  int64_t stop_step = 0;
  std::vector<double> values;  // recorded at rung 0, 1, ...
};

double Value(const json& value) {
  if (value.is_null()) return std::numeric_limits<double>::quiet_NaN();
  if (value.is_string()) {
    if (value.get<std::string>() == "nan") return std::numeric_limits<double>::quiet_NaN();
    throw std::runtime_error("a value string other than \"nan\": " + value.dump());
  }
  return value.get<double>();
}

json Run(const json& c) {
  RungRule rule;
  rule.min_iters = c.at("min_iters").get<int64_t>();
  rule.reduction_factor = c.at("reduction_factor").get<int>();
  rule.minimize = c.at("minimize").get<bool>();
  rule.max_iters = 0;  // Optuna's pruner has no top rung
  RungBoard board;
  std::map<int64_t, TrialState> trials;
  for (const json& report : c.at("reports")) {
    TrialState& trial = trials[report.at(0).get<int64_t>()];
    // A stopped trial no longer runs, so it has nothing more to report.
    if (trial.stopped) continue;
    const int64_t step = report.at(1).get<int64_t>();
    const RungVerdict verdict = board.Report(rule, trial.rung, step, Value(report.at(2)));
    trial.rung = verdict.rung;
    for (const auto& [rung, value] : verdict.recorded) {
      if (rung != static_cast<int>(trial.values.size())) {
        throw std::runtime_error("a report recorded rung " + std::to_string(rung) + " out of turn");
      }
      trial.values.push_back(value);
    }
    if (verdict.stop) {
      trial.stopped = true;
      trial.stop_step = step;
    }
  }
  json out = json::object();
  for (const auto& [id, trial] : trials) {
    out[std::to_string(id)] = {{"stop_step", trial.stopped ? json(trial.stop_step) : json()},
                               {"rung", trial.rung},
                               {"values", trial.values}};
  }
  return out;
}

}  // namespace

int main() {
  try {
    json out = json::array();
    for (const json& c : json::parse(std::cin)) out.push_back(Run(c));
    std::cout << out.dump() << "\n";
  } catch (const std::exception& error) {
    std::cerr << "asha_probe: " << error.what() << "\n";
    return 2;
  }
  return 0;
}
