// `spheret eval`: zero-shot evaluation of finished trials, scheduled as jobs that workers lease
// like trials (the coordinator's Evaluate). Prints what became of each trial: the tasks a new
// job scores, or why none was needed.
#include <google/protobuf/util/json_util.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/commands.h"
#include "client/fetch.h"
#include "client/report/table.h"
#include "config/train_config.h"

namespace spheret::client {
namespace {

v1::EvaluateSweepRequest RequestOf(const EvalOptions& options, int64_t sweep_id) {
  v1::EvaluateSweepRequest request;
  request.set_sweep_id(sweep_id);
  for (int64_t trial : options.trials) request.add_trial_ids(trial);
  for (const std::string& where : options.where) request.add_where(where);
  const bool all = options.tasks.size() == 1 && options.tasks.front() == "all";
  for (const std::string& task : all ? ZeroShotTaskNames() : options.tasks) {
    request.add_tasks(task);
  }
  request.set_data(options.data);
  request.set_dry_run(options.dry_run);
  return request;
}

void PrintPlans(const v1::EvaluateSweepResponse& response, Table* table) {
  for (const v1::EvalPlan& plan : response.plans()) {
    table->rows.push_back({std::to_string(plan.trial_id()),
                           plan.step() > 0 ? std::to_string(plan.step()) : "",
                           absl::StrJoin(plan.tasks(), ","),
                           plan.job_id() > 0 ? std::to_string(plan.job_id()) : "", plan.note()});
  }
}

}  // namespace

absl::Status Evaluate(Connection& connection, const EvalOptions& options, std::ostream& out) {
  absl::StatusOr<std::vector<int64_t>> sweeps = ResolveSweeps(connection, options.sweeps);
  if (!sweeps.ok()) return sweeps.status();
  if (!options.trials.empty() && sweeps->size() != 1) {
    return absl::InvalidArgumentError("eval: --trials needs exactly one sweep");
  }
  Table table;
  table.header = {"trial", "step", "tasks scheduled", "job", "note"};
  int64_t created = 0, planned = 0;
  for (int64_t sweep_id : *sweeps) {
    v1::EvaluateSweepResponse response;
    const grpc::Status status = connection.sweeps().EvaluateSweep(
        connection.Context().get(), RequestOf(options, sweep_id), &response);
    if (!status.ok()) return connection.Error(status, absl::StrCat("eval ", sweep_id));
    if (options.json) {
      std::string text;
      (void)google::protobuf::util::MessageToJsonString(response, &text);
      out << text << "\n";
    }
    created += response.created_jobs();
    for (const v1::EvalPlan& plan : response.plans()) planned += plan.tasks_size() > 0 ? 1 : 0;
    PrintPlans(response, &table);
  }
  if (!options.json) {
    out << RenderText(table);
    out << (options.dry_run ? absl::StrCat("dry run: ", planned, " job(s) would be scheduled\n")
                            : absl::StrCat(created, " evaluation job(s) scheduled\n"));
  }
  if (!options.wait || options.dry_run) return absl::OkStatus();
  for (int64_t sweep_id : *sweeps) {
    if (absl::Status watched = Watch(connection, {sweep_id, /*live=*/false}, out); !watched.ok()) {
      return watched;
    }
  }
  return absl::OkStatus();
}

}  // namespace spheret::client
