#include "client/fetch.h"

#include <fnmatch.h>

#include <algorithm>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/printable.h"
#include "client/proto_text.h"
#include "protocol/trainer_events.h"

namespace spheret::client {
namespace {

constexpr int kResultsPage = 500;  // rows per QueryResults call

// The CLI's one road from a reply's config text to a value (ConfigOf, the report structs).
TrialConfig ReadConfig(std::string config_json) { return TrialConfig(std::move(config_json)); }

// A trial's state as the reports hold it (kPending for a state this version does not know).
TrialState StateOf(v1::TrialState state) {
  return ParseTrialState(TrialStateText(state)).value_or(TrialState::kPending);
}

// One row of QueryResults (failed evaluations are said on stderr); its config parsed here, once.
TrialResult ResultOf(const v1::ResultRow& row) {
  TrialResult trial{
      row.trial_id(), StateOf(row.state()), ReadConfig(row.config_json()), {}, row.role()};
  for (const auto& [name, summary] : row.metrics()) {
    trial.values[name] = summary.last();
    if (summary.count() > 0) trial.stop_step = std::max(trial.stop_step, summary.last_step());
  }
  for (const v1::EvalScore& eval : row.evals()) {
    if (eval.metric() == protocol::kEvalErrorMetric) {
      std::cerr << "trial " << row.trial_id() << ": zero-shot eval failed at step " << eval.step()
                << " (training results kept): " << PrintableLines(eval.error()) << "\n";
      continue;
    }
    trial.values[ZeroShotMetricName(eval.task(), eval.metric())] =
        ZeroShotDisplayValue(eval.metric(), eval.value());
  }
  return trial;
}

}  // namespace

absl::StatusOr<v1::TrialLogs> FetchTrialLogs(Connection& connection, int64_t trial_id,
                                             int max_events) {
  v1::GetTrialLogsRequest request;
  request.set_trial_id(trial_id);
  request.set_max_events(max_events);
  v1::TrialLogs logs;
  std::vector<v1::TrialLogs> older;  // the pages after the first, each older than the one before
  for (v1::TrialLogs* page = &logs;; page = &older.emplace_back()) {
    grpc::Status status =
        connection.sweeps().GetTrialLogs(connection.Context().get(), request, page);
    if (!status.ok()) return connection.Error(status, absl::StrCat("events of trial ", trial_id));
    const int received = page->events_size();
    // A coordinator that pages by bytes always sends one event: an empty page ends the walk.
    if (!page->has_next_page_token() || received == 0) break;
    request.set_max_events(request.max_events() - received);
    if (request.max_events() <= 0) break;
    *request.mutable_page_token() = page->next_page_token();
  }
  google::protobuf::RepeatedPtrField<v1::StoredEvent> events;
  for (auto page = older.rbegin(); page != older.rend(); ++page) {
    for (v1::StoredEvent& event : *page->mutable_events()) *events.Add() = std::move(event);
  }
  for (v1::StoredEvent& event : *logs.mutable_events()) *events.Add() = std::move(event);
  logs.mutable_events()->Swap(&events);
  logs.clear_next_page_token();
  return logs;
}

namespace {

// The step a DIVERGED trial's loss diverged at: its trainer's last `diverged` event among its
// latest stored events (the event ends the run, so it is among them). Unchanged when none is.
absl::Status FindDivergedStep(Connection& connection, TrialResult* trial) {
  constexpr int kLatestEvents = 64;
  absl::StatusOr<v1::TrialLogs> logs = FetchTrialLogs(connection, trial->trial_id, kLatestEvents);
  if (!logs.ok()) return logs.status();
  for (auto event = logs->events().rbegin(); event != logs->events().rend(); ++event) {
    protocol::TrainerEvent parsed;
    if (!protocol::ParseTrainerEvent(event->json(), &parsed).ok()) continue;
    if (const auto* diverged = std::get_if<protocol::DivergedEvent>(&parsed)) {
      trial->stop_step = diverged->step;
      trial->stop_step_exact = true;
      return absl::OkStatus();
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<TrialResult>> FetchOne(Connection& connection, int64_t sweep_id,
                                                  const std::vector<std::string>& metrics) {
  v1::QueryResultsRequest request;
  request.set_sweep_id(sweep_id);
  request.set_page_size(kResultsPage);
  for (const std::string& metric : metrics) request.add_metrics(metric);
  std::vector<TrialResult> trials;
  for (;;) {
    v1::QueryResultsResponse response;
    grpc::Status status =
        connection.sweeps().QueryResults(connection.Context().get(), request, &response);
    if (!status.ok()) return connection.Error(status, absl::StrCat("results of sweep ", sweep_id));
    for (const v1::ResultRow& row : response.rows()) {
      trials.push_back(ResultOf(row));
      if (trials.back().state != TrialState::kDiverged) continue;
      if (absl::Status found = FindDivergedStep(connection, &trials.back()); !found.ok()) {
        return found;
      }
    }
    if (response.next_page_token() == 0) return trials;
    request.set_page_token(response.next_page_token());
  }
}

}  // namespace

absl::StatusOr<std::vector<v1::Sweep>> AllSweeps(Connection& connection) {
  std::vector<v1::Sweep> sweeps;
  v1::ListSweepsRequest request;
  for (;;) {
    v1::ListSweepsResponse response;
    grpc::Status status =
        connection.sweeps().ListSweeps(connection.Context().get(), request, &response);
    if (!status.ok()) return connection.Error(status, "sweeps");
    sweeps.insert(sweeps.end(), response.sweeps().begin(), response.sweeps().end());
    if (response.next_page_token() == 0) return sweeps;
    request.set_page_token(response.next_page_token());
  }
}

absl::StatusOr<std::vector<int64_t>> ResolveSweeps(Connection& connection,
                                                   const std::vector<std::string>& arguments) {
  std::vector<int64_t> ids;
  std::vector<v1::Sweep> sweeps;
  bool listed = false;
  for (const std::string& argument : arguments) {
    int64_t id = 0;
    if (absl::SimpleAtoi(argument, &id)) {
      if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
      continue;
    }
    if (!listed) {
      absl::StatusOr<std::vector<v1::Sweep>> all = AllSweeps(connection);
      if (!all.ok()) return all.status();
      sweeps = std::move(*all);
      listed = true;
    }
    bool matched = false;
    for (const v1::Sweep& sweep : sweeps) {
      if (fnmatch(argument.c_str(), sweep.name().c_str(), 0) != 0) continue;
      matched = true;
      if (std::find(ids.begin(), ids.end(), sweep.sweep_id()) == ids.end()) {
        ids.push_back(sweep.sweep_id());
      }
    }
    if (!matched) {
      return absl::NotFoundError("no sweep is named '" + argument +
                                 "' (give sweep ids, names or a glob of names; `spheret sweeps` "
                                 "lists them)");
    }
  }
  if (ids.empty()) return absl::InvalidArgumentError("name at least one sweep");
  return ids;
}

absl::StatusOr<v1::Sweep> FetchSweep(Connection& connection, int64_t sweep_id) {
  v1::GetSweepRequest request;
  request.set_sweep_id(sweep_id);
  v1::Sweep sweep;
  grpc::Status status = connection.sweeps().GetSweep(connection.Context().get(), request, &sweep);
  if (!status.ok()) return connection.Error(status, absl::StrCat("sweep ", sweep_id));
  return sweep;
}

absl::StatusOr<std::string> DescribeSweeps(Connection& connection,
                                           const std::vector<int64_t>& sweep_ids) {
  std::vector<std::string> parts;
  for (int64_t sweep_id : sweep_ids) {
    absl::StatusOr<v1::Sweep> sweep = FetchSweep(connection, sweep_id);
    if (!sweep.ok()) return sweep.status();
    parts.push_back(absl::StrCat(sweep_id, " (", sweep->name(), ")"));
  }
  return absl::StrJoin(parts, ", ");
}

absl::StatusOr<std::vector<TrialResult>> FetchResults(Connection& connection,
                                                      const std::vector<int64_t>& sweep_ids,
                                                      const std::vector<std::string>& metrics,
                                                      bool search_trials) {
  std::vector<TrialResult> trials;
  for (int64_t sweep_id : sweep_ids) {
    absl::StatusOr<std::vector<TrialResult>> one = FetchOne(connection, sweep_id, metrics);
    if (!one.ok()) return one.status();
    if (one->empty())
      return absl::NotFoundError(absl::StrCat("sweep ", sweep_id, " has no trials"));
    const auto is_search = [](const TrialResult& t) { return t.role == "search"; };
    const bool confirmed = std::any_of(one->begin(), one->end(),
                                       [](const TrialResult& t) { return t.role == "confirm"; });
    if (!search_trials && confirmed) {
      const auto left = std::count_if(one->begin(), one->end(), is_search);
      one->erase(std::remove_if(one->begin(), one->end(), is_search), one->end());
      std::cerr << "sweep " << sweep_id << ": its confirm trials are shown; its " << left
                << " search trials are left out (--search-trials shows them)\n";
    }
    trials.insert(trials.end(), one->begin(), one->end());
  }
  return trials;
}

absl::StatusOr<std::vector<CurveInput>> FetchCurves(Connection& connection,
                                                    const std::vector<int64_t>& sweep_ids,
                                                    const std::string& metric, int64_t max_points) {
  std::vector<CurveInput> curves;
  for (int64_t sweep_id : sweep_ids) {
    v1::StreamCurvesRequest request;
    request.set_sweep_id(sweep_id);
    request.set_metric(metric);
    request.set_max_points(max_points);
    std::unique_ptr<grpc::ClientContext> context = connection.Context(/*stream=*/true);
    auto reader = connection.sweeps().StreamCurves(context.get(), request);
    v1::Curve curve;
    while (reader->Read(&curve)) {
      if (curve.steps().empty()) continue;
      curves.push_back({curve.trial_id(),
                        ReadConfig(curve.config_json()),
                        {curve.steps().begin(), curve.steps().end()},
                        {curve.values().begin(), curve.values().end()},
                        StateOf(curve.state()),
                        curve.role(),
                        curve.points()});
    }
    grpc::Status status = reader->Finish();
    if (!status.ok()) return connection.Error(status, absl::StrCat("curves of sweep ", sweep_id));
  }
  return curves;
}

std::string DownsampledNote(const std::vector<CurveInput>& curves) {
  int64_t downsampled = 0, drawn = 0, points = 0;
  for (const CurveInput& curve : curves) {
    if (curve.points <= static_cast<int64_t>(curve.steps.size())) continue;
    ++downsampled;
    drawn += static_cast<int64_t>(curve.steps.size());
    points += curve.points;
  }
  if (downsampled == 0) return "";
  return absl::StrCat("; ", downsampled, " of ", curves.size(), " curves drawn from ", drawn,
                      " of their ", points,
                      " points (per bucket of steps: first, last, min, max and first NaN)");
}

absl::StatusOr<std::vector<DiagSeries>> FetchLayerValues(Connection& connection,
                                                         const std::vector<int64_t>& sweep_ids,
                                                         const std::string& field) {
  std::vector<DiagSeries> series;
  for (int64_t sweep_id : sweep_ids) {
    v1::StreamLayerValuesRequest request;
    request.set_sweep_id(sweep_id);
    request.set_field(field);
    std::unique_ptr<grpc::ClientContext> context = connection.Context(/*stream=*/true);
    auto reader = connection.sweeps().StreamLayerValues(context.get(), request);
    v1::LayerValues trial;
    while (reader->Read(&trial)) {
      const TrialConfig config = ReadConfig(trial.config_json());
      for (const v1::LayerSeries& one : trial.series()) {
        series.push_back({trial.trial_id(),
                          config,
                          one.layer(),
                          one.sublayer(),
                          {one.steps().begin(), one.steps().end()},
                          {one.values().begin(), one.values().end()}});
      }
    }
    grpc::Status status = reader->Finish();
    if (!status.ok()) {
      return connection.Error(status, absl::StrCat(field, " values of sweep ", sweep_id));
    }
  }
  return series;
}

TrialConfig ConfigOf(const v1::Trial& trial) { return ReadConfig(trial.config_json()); }

std::vector<TrialConfig> ConfigsOf(const v1::SubmitSweepResponse& dry_run) {
  std::vector<TrialConfig> configs;
  for (const std::string& text : dry_run.configs_json()) configs.push_back(ReadConfig(text));
  return configs;
}

}  // namespace spheret::client
