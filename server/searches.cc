#include "server/searches.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/sha256.h"
#include "base/status_macros.h"
#include "server/trial_configs.h"

namespace spheret {
namespace {

using nlohmann::json;

// A test's crash point: SPHERET_FAILPOINT=before_confirm kills the coordinator with SIGKILL
// after it decided a group's confirm trials and before it stored them.
void Failpoint(const char* name) {
  const char* set = std::getenv("SPHERET_FAILPOINT");
  if (set != nullptr && std::string(set) == name) std::raise(SIGKILL);
}

// A search group of one sweep: whether its search ended, whether it has confirm trials, and its
// SUCCEEDED search trials ranked by the search metric's last value (best first once sorted).
struct SearchGroup {
  bool ended = true, confirmed = false;
  std::vector<std::pair<double, const TrialRecord*>> ranked;
};

// The search groups of a sweep's (typed) trials.
absl::StatusOr<std::map<std::string, SearchGroup>> GroupsOf(
    store::Store& store, const SweepRecord& sweep, const std::vector<TrialRecord>& trials) {
  std::map<std::string, SearchGroup> groups;
  for (const TrialRecord& trial : trials) {
    if (trial.role.empty() || trial.eval_of > 0) continue;
    SearchGroup& group = groups[trial.search_group];
    if (trial.role == "confirm") group.confirmed = true;
    if (trial.role != "search") continue;
    group.ended = group.ended && IsTerminal(trial.state);
    if (trial.state != TrialState::kSucceeded) continue;
    SPHERET_ASSIGN_OR_RETURN(auto summaries, store.Summaries(trial.trial_id));
    auto found = summaries.find(sweep.search.metric);
    if (found == summaries.end() || std::isnan(found->second.last)) continue;
    const double value = found->second.last;
    group.ranked.emplace_back(sweep.search.minimize ? value : -value, &trial);
  }
  return groups;
}

// The confirm trials of one ended group: its best `top` settings (a setting is a config less its
// seed) among SUCCEEDED search trials, by `metric`'s last value, once per confirm seed; derived
// from each trial's typed config.
std::vector<TrialSpec> ConfirmSpecs(
    const SearchSettings& search, const std::vector<std::pair<double, const TrialRecord*>>& ranked,
    const std::string& group) {
  std::vector<TrialSpec> specs;
  std::vector<std::string> settings;
  for (const auto& [value, trial] : ranked) {
    json setting = ConfigOf(*trial).object();
    setting.erase("seed");
    const std::string text = setting.dump();
    if (std::find(settings.begin(), settings.end(), text) != settings.end()) continue;
    settings.push_back(text);
    for (int64_t seed : search.confirm_seeds) {
      json config = setting;
      config["seed"] = seed;
      TrialSpec spec;
      spec.config_json = config.dump();
      spec.trial_key = Sha256Hex("confirm/" + spec.config_json);
      spec.role = "confirm";
      spec.search_group = group;
      specs.push_back(std::move(spec));
    }
    if (static_cast<int>(settings.size()) == search.confirm_top) break;
  }
  return specs;
}

// The confirm trials of the groups that ended with none yet; *searching: a group's search still
// runs.
std::vector<TrialSpec> DueConfirmSpecs(int64_t sweep_id, const SearchSettings& search,
                                       std::map<std::string, SearchGroup>& groups,
                                       bool* searching) {
  std::vector<TrialSpec> specs;
  for (auto& [name, group] : groups) {
    *searching = *searching || !group.ended;
    if (!group.ended || group.confirmed) continue;
    if (group.ranked.empty()) {
      spdlog::warn("sweep {} group {}: no search trial SUCCEEDED; nothing to confirm", sweep_id,
                   name);
      continue;
    }
    std::stable_sort(group.ranked.begin(), group.ranked.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<TrialSpec> more = ConfirmSpecs(search, group.ranked, name);
    specs.insert(specs.end(), more.begin(), more.end());
  }
  return specs;
}

}  // namespace

absl::Status Searches::LoadRungsLocked() {
  boards_.clear();
  SPHERET_ASSIGN_OR_RETURN(std::vector<RungValue> values, state_.store->RungValues(0));
  for (const RungValue& value : values) {
    const SweepRecord* sweep = state_.scheduler.FindSweep(value.sweep_id);
    if (sweep == nullptr || sweep->state != SweepState::kActive) continue;
    boards_[{value.sweep_id, value.search_group}].Add(value.rung, value.value);
  }
  return absl::OkStatus();
}

void Searches::NoteEndedLocked(const std::vector<TrialRecord>& trials) {
  for (const TrialRecord& trial : trials) {
    if (trial.role == "search" && IsTerminal(trial.state)) confirm_due_.insert(trial.sweep_id);
  }
}

int64_t Searches::TrialsAtRungLocked(int64_t sweep_id, int rung) const {
  int64_t trials = 0;
  for (auto it = boards_.lower_bound({sweep_id, ""});
       it != boards_.end() && it->first.first == sweep_id; ++it) {
    trials += static_cast<int64_t>(it->second.Values(rung).size());
  }
  return trials;
}

int64_t Searches::MaxItersLocked(const TrialRecord& trial) {
  auto max_iters = max_iters_.find(trial.trial_id);
  if (max_iters == max_iters_.end()) {
    absl::StatusOr<TrainConfig> config = ConfigOf(trial).Resolve();
    max_iters = max_iters_.emplace(trial.trial_id, config.ok() ? config->max_iters : 0).first;
  }
  return max_iters->second;
}

void Searches::JudgeLocked(const TrialRecord& trial, const std::vector<MetricRow>& rows,
                           Changes* changes) {
  const SweepRecord* sweep = state_.scheduler.FindSweep(trial.sweep_id);
  if (sweep == nullptr) return;
  const int64_t max_iters = MaxItersLocked(trial);
  const SearchSettings& search = sweep->search;
  const sched::RungRule rule{search.min_iters, search.reduction_factor, search.minimize, max_iters};
  sched::RungBoard& board = boards_[{trial.sweep_id, trial.search_group}];
  std::vector<const MetricRow*> reports;
  for (const MetricRow& row : rows) {
    if (row.name == search.metric) reports.push_back(&row);
  }
  std::sort(reports.begin(), reports.end(),
            [](const MetricRow* a, const MetricRow* b) { return a->step < b->step; });
  int rung = trial.rung;
  for (const MetricRow* row : reports) {
    const sched::RungVerdict verdict = board.Report(rule, rung, row->step, row->value);
    for (size_t i = 0; i < verdict.recorded.size(); ++i) {
      const auto& [at, value] = verdict.recorded[i];
      const bool promoted = !verdict.stop || i + 1 < verdict.recorded.size();
      changes->rung_values.push_back(
          {trial.sweep_id, trial.search_group, at, trial.trial_id, row->step, value, promoted});
      state_.metrics->SetRungTrials(sweep->name, at, TrialsAtRungLocked(trial.sweep_id, at));
    }
    rung = verdict.rung;
    if (!verdict.stop) continue;
    const int at = verdict.recorded.empty() ? rung : rung - 1;  // a NaN is not recorded
    spdlog::info("trial {}: pruned at rung {} (step {}, {} {}); {} of its group's values there",
                 trial.trial_id, at, row->step, search.metric, row->value, board.Values(at).size());
    state_.metrics->TrialPruned(sweep->name, row->step, max_iters);
    state_.scheduler.Judge(trial.trial_id, rung, /*prune=*/true, changes);
    return;
  }
  if (rung != trial.rung) state_.scheduler.Judge(trial.trial_id, rung, /*prune=*/false, changes);
}

absl::Status Searches::JudgeBatch(const EventBatchRecord& batch) {
  return decisions_.Decide([&](int64_t /*now*/, Changes* changes) -> absl::Status {
    const TrialRecord* trial = state_.scheduler.FindTrial(batch.trial_id);
    if (trial == nullptr || trial->attempt != batch.attempt || trial->role != "search" ||
        trial->prune_exempt || trial->prune_requested || trial->eval_of > 0) {
      return absl::OkStatus();
    }
    const SweepRecord* sweep = state_.scheduler.FindSweep(trial->sweep_id);
    if (sweep == nullptr || !sweep->search.asha()) return absl::OkStatus();
    const TrialRecord copy = *trial;  // Judge may end it
    JudgeLocked(copy, batch.metrics, changes);
    return absl::OkStatus();
  });
}

absl::StatusOr<TrialRecord> Searches::Resume(int64_t trial_id) {
  SPHERET_ASSIGN_OR_RETURN(std::optional<TrialRecord> trial, state_.store->GetTrial(trial_id));
  if (!trial) return absl::NotFoundError(absl::StrCat("no trial ", trial_id));
  TypeTrial(&*trial);  // where a resumed trial's config enters: read from the store
  SPHERET_RETURN_IF_ERROR(decisions_.Decide([&](int64_t /*now*/, Changes* changes) -> absl::Status {
    return state_.scheduler.Resume(*trial, changes);
  }));
  state_.changed.notify_all();
  std::lock_guard<std::mutex> lock(state_.mutex);
  const TrialRecord* live = state_.scheduler.FindTrial(trial_id);
  return live != nullptr ? *live : *trial;
}

void Searches::ConfirmDue() {
  std::set<int64_t> due;
  bool all = false;
  {
    std::lock_guard<std::mutex> lock(state_.mutex);
    due.swap(confirm_due_);
    all = std::exchange(confirm_all_, false);
  }
  if (all) {
    absl::StatusOr<std::vector<SweepRecord>> sweeps = state_.store->ListSweeps(0, INT32_MAX);
    if (!sweeps.ok()) {
      std::lock_guard<std::mutex> lock(state_.mutex);
      confirm_all_ = true;  // again on the next pass
      return;
    }
    for (const SweepRecord& sweep : *sweeps) {
      if (!sweep.search.confirm_seeds.empty()) due.insert(sweep.sweep_id);
    }
  }
  for (int64_t sweep_id : due) {
    if (absl::Status status = Confirm(sweep_id); !status.ok()) {
      spdlog::warn("sweep {}: confirm trials not added yet ({}); trying again", sweep_id,
                   std::string(status.message()));
      std::lock_guard<std::mutex> lock(state_.mutex);
      confirm_due_.insert(sweep_id);
    }
  }
}

absl::Status Searches::Confirm(int64_t sweep_id) {
  store::Store& store = *state_.store;
  SPHERET_ASSIGN_OR_RETURN(SweepRecord sweep, store.GetSweep(sweep_id));
  if (sweep.search.confirm_seeds.empty() || sweep.state == SweepState::kCancelled) {
    return absl::OkStatus();
  }
  SPHERET_ASSIGN_OR_RETURN(std::vector<TrialRecord> trials, store::AllTrials(store, sweep_id));
  TypeTrials(&trials);  // where the sweep's configs enter: read from the store
  SPHERET_ASSIGN_OR_RETURN(auto groups, GroupsOf(store, sweep, trials));
  bool searching = false;  // a group's search still runs
  std::vector<TrialSpec> specs = DueConfirmSpecs(sweep_id, sweep.search, groups, &searching);
  if (specs.empty()) {
    // Nothing to add: a sweep left ACTIVE for its confirm trials (SetTerminal) ends now.
    if (searching) return absl::OkStatus();
    return decisions_.Decide([&](int64_t /*now*/, Changes* changes) {
      state_.scheduler.CloseIfIdle(sweep_id, changes);
      return absl::OkStatus();
    });
  }
  Failpoint("before_confirm");
  SPHERET_ASSIGN_OR_RETURN(store::SubmitOutcome outcome,
                           store.SubmitSweep(sweep, specs, state_.clock->NowMs()));
  if (!outcome.created.empty()) {
    spdlog::info("sweep {}: {} confirm trials added", sweep_id, outcome.created.size());
  }
  decisions_.Admit(outcome);
  return absl::OkStatus();
}

}  // namespace spheret
