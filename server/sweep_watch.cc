#include "server/sweep_watch.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace spheret {
namespace {

constexpr int kTrialPage = 1000;

}  // namespace

absl::Status ForEachTrial(store::StateStore& store, int64_t sweep_id,
                          const std::function<absl::Status(const TrialRecord&)>& visit) {
  store::TrialQuery query;
  query.sweep_id = sweep_id;
  query.limit = kTrialPage;
  for (;;) {
    SPHERET_ASSIGN_OR_RETURN(std::vector<TrialRecord> trials, store.ListTrials(query));
    for (const TrialRecord& trial : trials) SPHERET_RETURN_IF_ERROR(visit(trial));
    if (static_cast<int>(trials.size()) < query.limit) return absl::OkStatus();
    query.after_trial_id = trials.back().trial_id;
  }
}

absl::StatusOr<WatchPass> SweepWatch::Next() {
  // Listed, not got: a list leaves the sweep file out, which a pass does not need.
  SPHERET_ASSIGN_OR_RETURN(std::vector<SweepRecord> listed,
                           state_->ListSweeps(sweep_id_ - 1, /*limit=*/1));
  if (listed.empty() || listed.front().sweep_id != sweep_id_) {
    return absl::NotFoundError(absl::StrCat("no sweep ", sweep_id_));
  }
  const SweepRecord& sweep = listed.front();
  WatchPass pass;
  bool all_ended = true;
  SPHERET_RETURN_IF_ERROR(ForEachTrial(*state_, sweep_id_, [&](const TrialRecord& trial) {
    all_ended = all_ended && IsTerminal(trial.state);
    auto previous = sent_.find(trial.trial_id);
    if (previous != sent_.end() && IsTerminal(trial.state) &&
        std::get<0>(previous->second) == trial.state &&
        std::get<1>(previous->second) == trial.attempt) {
      return absl::OkStatus();  // sent as ended: nothing about it changes any more
    }
    SPHERET_ASSIGN_OR_RETURN(auto summaries, metrics_->Summaries(trial.trial_id));
    int64_t step = -1;
    for (const auto& [name, summary] : summaries) step = std::max(step, summary.last_step);
    const auto seen = std::make_tuple(trial.state, trial.attempt, step);
    if (previous != sent_.end() && previous->second == seen) return absl::OkStatus();
    sent_[trial.trial_id] = seen;
    pass.changed.push_back({trial, std::move(summaries)});
    return absl::OkStatus();
  }));
  pass.finished = all_ended && sweep.state != SweepState::kActive;
  return pass;
}

}  // namespace spheret
