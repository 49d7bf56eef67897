#include "server/evaluations.h"

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "base/text_prefix.h"
#include "server/sweep/sweep_spec.h"
#include "server/trial_configs.h"

namespace spheret {
namespace {

using nlohmann::json;

std::vector<std::string> TasksOf(const TrialConfig& config) {
  std::vector<std::string> tasks;
  for (absl::string_view task :
       absl::StrSplit(config.KnobText("eval_tasks"), ',', absl::SkipWhitespace())) {
    tasks.emplace_back(task);
  }
  return tasks;
}

// InvalidArgument naming `field` when `text` is longer than a string knob may be: a job's config
// carries it, and a config too large for a lease failed every attempt of the job instead.
absl::Status CheckEvalText(const std::string& field, absl::string_view text) {
  if (text.size() <= kMaxKnobTextBytes) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(field, ": a text of ", text.size(),
                                                 " bytes, above the limit of ", kMaxKnobTextBytes,
                                                 " (starts '", TextPrefix(text, 16), "')"));
}

absl::Status CheckEvalTexts(const EvalRequest& request) {
  SPHERET_RETURN_IF_ERROR(CheckEvalText("data", request.data));
  for (size_t i = 0; i < request.tasks.size(); ++i) {
    SPHERET_RETURN_IF_ERROR(CheckEvalText(absl::StrCat("tasks[", i, "]"), request.tasks[i]));
  }
  SPHERET_RETURN_IF_ERROR(
      CheckEvalText("tasks (joined by ',' as eval_tasks)", absl::StrJoin(request.tasks, ",")));
  for (size_t i = 0; i < request.where.size(); ++i) {
    const auto& [knob, value] = request.where[i];
    SPHERET_RETURN_IF_ERROR(CheckEvalText(absl::StrCat("where[", i, "]"), knob + "=" + value));
  }
  return absl::OkStatus();
}

// The tasks, unknown ones and a missing data folder refused by the trainer's own config checks.
absl::Status CheckEvalRequest(const EvalRequest& request) {
  if (request.tasks.empty()) return absl::InvalidArgumentError("no tasks to evaluate");
  if (request.data.empty()) {
    return absl::InvalidArgumentError("no data folder: the tasks' JSONL files (e.g. zeroshot)");
  }
  SPHERET_RETURN_IF_ERROR(CheckEvalTexts(request));
  const json probe = {{"eval_tasks", absl::StrJoin(request.tasks, ",")},
                      {"eval_data", request.data}};
  return ResolveConfigObject(probe).status();
}

// The training trials the request names (all when it names none) that match its `where`;
// `trials` typed.
absl::StatusOr<std::vector<const TrialRecord*>> SelectTrials(const std::vector<TrialRecord>& trials,
                                                             const EvalRequest& request) {
  std::map<int64_t, const TrialRecord*> by_id;
  for (const TrialRecord& trial : trials) by_id[trial.trial_id] = &trial;
  for (int64_t id : request.trial_ids) {
    auto found = by_id.find(id);
    if (found == by_id.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("trial ", id, " is not a trial of sweep ", request.sweep_id));
    }
    if (found->second->eval_of > 0) {
      return absl::InvalidArgumentError(absl::StrCat("trial ", id,
                                                     " is an evaluation job (of trial ",
                                                     found->second->eval_of, "), not a trial"));
    }
  }
  const std::set<int64_t> named(request.trial_ids.begin(), request.trial_ids.end());
  std::set<std::string> knobs_seen;
  std::vector<const TrialRecord*> selected;
  for (const TrialRecord& trial : trials) {
    if (trial.eval_of > 0 || (!named.empty() && named.count(trial.trial_id) == 0)) continue;
    const TrialConfig& config = ConfigOf(trial);
    bool matches = true;
    for (const auto& [knob, value] : request.where) {
      if (config.Find(knob) != nullptr) knobs_seen.insert(knob);
      matches = matches && config.KnobText(knob) == value;
    }
    if (matches) selected.push_back(&trial);
  }
  for (const auto& [knob, value] : request.where) {
    if (knobs_seen.count(knob) == 0) {
      return absl::InvalidArgumentError(absl::StrCat("--where ", knob, "=", value,
                                                     ": no trial of sweep ", request.sweep_id,
                                                     " sets '", knob, "'"));
    }
  }
  return selected;
}

// Chooses the tasks of `request` a new job scores on `trial`'s checkpoint of plan->step
// (plan->tasks): those neither in `scored` nor being scored by a live job of that checkpoint
// (those jobs named in plan->note); returns how many jobs that checkpoint has had, whatever
// became of them. `trials` typed.
int ChooseTasks(const TrialRecord& trial, const std::vector<TrialRecord>& trials,
                const EvalRequest& request, const std::set<std::string>& scored, EvalPlan* plan) {
  std::map<std::string, int64_t> live;  // task -> the PENDING or RUNNING job that scores it
  int jobs = 0;
  for (const TrialRecord& job : trials) {
    if (job.eval_of != trial.trial_id || job.eval_step != plan->step) continue;
    ++jobs;
    if (IsTerminal(job.state)) continue;
    for (const std::string& task : TasksOf(ConfigOf(job))) live[task] = job.trial_id;
  }
  std::set<int64_t> busy;
  for (const std::string& task : request.tasks) {
    if (scored.count(task) > 0 || absl::c_linear_search(plan->tasks, task)) continue;
    if (auto job = live.find(task); job != live.end()) {
      busy.insert(job->second);
    } else {
      plan->tasks.push_back(task);
    }
  }
  if (!busy.empty()) plan->note = absl::StrCat("being scored by job ", absl::StrJoin(busy, ", "));
  if (plan->tasks.empty() && busy.empty()) {
    plan->note = absl::StrCat("already scored at step ", plan->step);
  }
  return jobs;
}

// The job that scores plan.tasks on `trial`'s checkpoint of plan.step with the tasks' folder
// `data`, the checkpoint's job number `jobs` + 1: its config is the trial's typed one with
// eval_tasks and eval_data set. InvalidArgument when that config does not resolve.
absl::StatusOr<TrialSpec> EvalJobSpec(const TrialRecord& trial, const std::string& data, int jobs,
                                      const EvalPlan& plan) {
  const std::string tasks = absl::StrJoin(plan.tasks, ",");
  const json config = ConfigWith(ConfigOf(trial), {{"eval_tasks", tasks}, {"eval_data", data}});
  SPHERET_RETURN_IF_ERROR(ResolveConfigObject(config).status());
  return TrialSpec{config.dump(),
                   absl::StrCat("eval/", trial.trial_id, "@", plan.step, "/", tasks, "#", jobs + 1),
                   trial.trial_id,
                   plan.step,
                   "",
                   ""};
}

}  // namespace

EvalWork EvalWorkOf(const TrialRecord& trial) {
  EvalWork work;
  if (trial.eval_of <= 0) return work;
  const TrialConfig& config = ConfigOf(trial);
  work.trial_id = trial.eval_of;
  work.step = trial.eval_step;
  work.tasks = TasksOf(config);
  work.data = config.KnobText("eval_data");
  return work;
}

absl::StatusOr<std::set<std::string>> Evaluations::ScoredTasks(int64_t trial_id, int64_t step) {
  std::set<std::string> scored;
  SPHERET_ASSIGN_OR_RETURN(std::vector<EvalRecord> evals, state_.store->Evals(trial_id));
  for (const EvalRecord& eval : evals) {
    if (eval.step == step && eval.error.empty()) scored.insert(eval.task);
  }
  return scored;
}

absl::StatusOr<std::optional<TrialSpec>> Evaluations::PlanEvaluation(
    const TrialRecord& trial, const std::vector<TrialRecord>& trials, const EvalRequest& request,
    EvalPlan* plan) {
  plan->trial_id = trial.trial_id;
  if (trial.state != TrialState::kSucceeded) {
    plan->note =
        absl::StrCat("is ", TrialStateName(trial.state), " (only SUCCEEDED trials are evaluated)");
    return std::nullopt;
  }
  SPHERET_ASSIGN_OR_RETURN(plan->step, state_.store->LatestCheckpointStep(trial.trial_id));
  if (plan->step == 0) {
    plan->note = "no checkpoint recorded";
    return std::nullopt;
  }
  SPHERET_ASSIGN_OR_RETURN(std::set<std::string> scored, ScoredTasks(trial.trial_id, plan->step));
  const int jobs = ChooseTasks(trial, trials, request, scored, plan);
  if (plan->tasks.empty()) return std::nullopt;
  return EvalJobSpec(trial, request.data, jobs, *plan);
}

absl::StatusOr<std::vector<EvalPlan>> Evaluations::Evaluate(const EvalRequest& request) {
  SPHERET_RETURN_IF_ERROR(CheckEvalRequest(request));
  store::Store& store = *state_.store;
  SPHERET_ASSIGN_OR_RETURN(SweepRecord sweep, store.GetSweep(request.sweep_id));
  if (sweep.state == SweepState::kCancelled) {
    return absl::FailedPreconditionError(
        absl::StrCat("sweep ", sweep.sweep_id, " (", sweep.name, ") is cancelled"));
  }
  SPHERET_ASSIGN_OR_RETURN(std::vector<TrialRecord> trials,
                           store::AllTrials(store, sweep.sweep_id));
  TypeTrials(&trials);  // where the sweep's configs enter: read from the store
  SPHERET_ASSIGN_OR_RETURN(std::vector<const TrialRecord*> selected, SelectTrials(trials, request));
  std::vector<EvalPlan> plans(selected.size());
  std::vector<TrialSpec> specs;
  std::map<std::string, size_t> plan_of_key;
  for (size_t i = 0; i < selected.size(); ++i) {
    SPHERET_ASSIGN_OR_RETURN(std::optional<TrialSpec> spec,
                             PlanEvaluation(*selected[i], trials, request, &plans[i]));
    if (!spec) continue;
    plan_of_key[spec->trial_key] = i;
    specs.push_back(std::move(*spec));
  }
  if (request.dry_run || specs.empty()) return plans;
  SPHERET_ASSIGN_OR_RETURN(store::SubmitOutcome outcome,
                           store.SubmitSweep(sweep, specs, state_.clock->NowMs()));
  decisions_.Admit(outcome);
  for (const TrialRecord& job : outcome.created) {
    plans[plan_of_key.at(job.trial_key)].job_id = job.trial_id;
  }
  for (EvalPlan& plan : plans) {
    if (!plan.tasks.empty() && plan.job_id == 0) {
      plan.note = "a job with these tasks was created at the same time by another call";
      plan.tasks.clear();
    }
  }
  return plans;
}

}  // namespace spheret
