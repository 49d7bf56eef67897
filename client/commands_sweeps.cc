// submit, sweeps, trials, cancel, logs.
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/printable.h"
#include "base/sha256.h"
#include "client/commands.h"
#include "client/fetch.h"
#include "client/proto_text.h"
#include "client/report/results.h"
#include "client/report/table.h"
#include "config/connection_script.h"
#include "config/knob_text.h"
#include "config/trial_config.h"
#include "server/sweep/connection_files.h"
#include "server/sweep/sweep_spec.h"

namespace spheret::client {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

absl::StatusOr<std::string> ReadSweepFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(path + ": cannot read the sweep file (no such file?)");
  std::stringstream text;
  text << in.rdbuf();
  if (text.str().empty()) return absl::InvalidArgumentError(path + ": the sweep file is empty");
  return text.str();
}

// The connection files the sweep names (method scripted; server/sweep/connection_files.h), each
// read relative to the sweep file's folder (an absolute name as it is). A name with no file here
// is left to the coordinator: it may be under the workers' --data-root, with connection_sha256.
absl::StatusOr<ConnectionFiles> ReadConnectionFiles(const std::string& sweep_file,
                                                    const std::string& spec_yaml) {
  ConnectionFiles files;
  absl::StatusOr<SweepSpec> spec = ParseSweepSpec(spec_yaml);
  if (!spec.ok()) return files;  // the coordinator names what is wrong with the file
  for (const std::string& name : ConnectionNames(*spec)) {
    const fs::path path =
        fs::path(name).is_absolute() ? fs::path(name) : fs::path(sweep_file).parent_path() / name;
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) continue;
    if (fs::file_size(path, ec) > kMaxConnectionScriptBytes) {
      return absl::InvalidArgumentError(sweep_file + ": connection file " + path.string() +
                                        " is over the limit of " +
                                        std::to_string(kMaxConnectionScriptBytes) + " bytes");
    }
    std::ifstream in(path, std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    if (!in) return absl::NotFoundError(sweep_file + ": cannot read " + path.string());
    files[name] = bytes.str();
  }
  return files;
}

// The same sweep file with the same connection files is the same submission.
std::string IdempotencyKey(const std::string& spec_yaml, const ConnectionFiles& files) {
  std::string identity = spec_yaml;
  for (const auto& [name, bytes] : files) absl::StrAppend(&identity, "\n", name, Sha256Hex(bytes));
  return "spheret-cli:" + Sha256Hex(identity);
}

// The knobs that tell the trials apart: the identity knobs first, then any other that varies.
std::vector<std::string> KnobColumns(const std::vector<TrialConfig>& configs) {
  std::vector<std::string> columns;
  for (const char* key : kIdentityKnobs) {
    for (const TrialConfig& config : configs) {
      if (config.Find(key) != nullptr) {
        columns.push_back(key);
        break;
      }
    }
  }
  for (const std::string& key : VaryingConfigKeys(configs)) {
    if (key != "connection_script") columns.push_back(key);  // connection_sha256 names it
  }
  return columns;
}

// The coordinator's notices on the expansion (e.g. sampled draws that coincided), one a line.
void PrintNotices(const v1::SubmitSweepResponse& response, std::ostream& out) {
  for (const std::string& notice : response.notices()) {
    out << "note: " << PrintableText(notice) << "\n";
  }
}

void PrintDryRun(const v1::SubmitSweepResponse& response, bool as_json, std::ostream& out) {
  const std::vector<TrialConfig> configs = ConfigsOf(response);
  if (as_json) {
    json trials = json::array();
    for (int i = 0; i < response.trial_keys_size(); ++i) {
      trials.push_back({{"trial_key", response.trial_keys(i)}, {"config", configs[i].object()}});
    }
    const std::vector<std::string> notices(response.notices().begin(), response.notices().end());
    out << json{{"trial_count", response.trial_count()}, {"trials", trials}, {"notices", notices}}
               .dump(2)
        << "\n";
    return;
  }
  Table table;
  const std::vector<std::string> knobs = KnobColumns(configs);
  table.header = {"#", "trial_key"};
  table.header.insert(table.header.end(), knobs.begin(), knobs.end());
  for (size_t i = 0; i < configs.size(); ++i) {
    std::vector<std::string> row = {std::to_string(i + 1), response.trial_keys(i).substr(0, 12)};
    for (const std::string& knob : knobs) row.push_back(configs[i].KnobText(knob));
    table.rows.push_back(std::move(row));
  }
  out << RenderText(table);
  // The settings every trial shares (a recipe's among them), so the listing shows them too.
  std::vector<std::string> common;
  if (!configs.empty()) {
    for (const auto& [key, value] : configs.front().object().items()) {
      if (key == "seed" || key == "connection_script" ||
          std::find(knobs.begin(), knobs.end(), key) != knobs.end()) {
        continue;
      }
      const bool shared =
          std::all_of(configs.begin(), configs.end(), [&](const TrialConfig& config) {
            const json* found = config.Find(key);
            return found != nullptr && *found == value;
          });
      if (shared) common.push_back(key + "=" + KnobValueText(value));
    }
  }
  if (!common.empty()) out << "every trial: " << absl::StrJoin(common, " ") << "\n";
  out << response.trial_count() << " trials (dry run: nothing was submitted)\n";
  PrintNotices(response, out);
}

std::string LocalTime(int64_t epoch_ms) {
  if (epoch_ms <= 0) return "";
  const std::time_t seconds = epoch_ms / 1000;
  std::tm local{};
  localtime_r(&seconds, &local);
  char buffer[32];
  std::strftime(buffer, sizeof(buffer), "%Y-%m-%d %H:%M:%S", &local);
  return buffer;
}

}  // namespace

absl::Status Submit(Connection& connection, const SubmitOptions& options, std::ostream& out) {
  absl::StatusOr<std::string> spec = ReadSweepFile(options.file);
  if (!spec.ok()) return spec.status();
  absl::StatusOr<ConnectionFiles> files = ReadConnectionFiles(options.file, *spec);
  if (!files.ok()) return files.status();
  v1::SubmitSweepRequest request;
  request.set_spec_yaml(*spec);
  request.set_dry_run(options.dry_run);
  request.mutable_connection_files()->insert(files->begin(), files->end());
  if (!options.dry_run) request.set_idempotency_key(IdempotencyKey(*spec, *files));
  v1::SubmitSweepResponse response;
  grpc::Status status =
      connection.sweeps().SubmitSweep(connection.Context().get(), request, &response);
  if (status.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
    return absl::InvalidArgumentError(options.file + ": " + status.error_message());
  }
  if (!status.ok()) return connection.Error(status, "submit " + options.file);
  if (options.dry_run) {
    PrintDryRun(response, options.json, out);
    return absl::OkStatus();
  }
  if (options.json) {
    out << ProtoJson(response) << "\n";
  } else {
    out << "sweep " << response.sweep_id() << ": " << response.trial_count() << " trials, "
        << response.created_trials() << " new\n";
    PrintNotices(response, out);
  }
  if (!options.wait) return absl::OkStatus();
  return Watch(connection, {response.sweep_id(), /*live=*/!options.json && IsTerminal(out)}, out);
}

absl::Status ListSweeps(Connection& connection, bool as_json, std::ostream& out) {
  absl::StatusOr<std::vector<v1::Sweep>> listed = AllSweeps(connection);
  if (!listed.ok()) return listed.status();
  const std::vector<v1::Sweep>& sweeps = *listed;
  if (as_json) {
    out << ProtoJsonArray(sweeps) << "\n";
    return absl::OkStatus();
  }
  Table table;
  table.header = {"sweep", "name", "state", "trials"};
  for (v1::TrialState state : AllTrialStates()) {
    table.header.push_back(absl::AsciiStrToLower(TrialStateText(state)));
  }
  table.header.insert(table.header.end(), {"priority", "submitted"});
  for (const v1::Sweep& sweep : sweeps) {
    std::vector<std::string> row = {std::to_string(sweep.sweep_id()), sweep.name(),
                                    SweepStateText(sweep.state()),
                                    std::to_string(sweep.trial_count())};
    for (v1::TrialState state : AllTrialStates()) {
      auto found = sweep.trials_by_state().find(TrialStateText(state));
      row.push_back(std::to_string(found == sweep.trials_by_state().end() ? 0 : found->second));
    }
    row.insert(row.end(), {std::to_string(sweep.priority()), LocalTime(sweep.submitted_ms())});
    table.rows.push_back(std::move(row));
  }
  out << RenderText(table);
  return absl::OkStatus();
}

absl::Status ShowSweep(Connection& connection, const SweepOptions& options, std::ostream& out) {
  v1::GetSweepRequest request;
  request.set_sweep_id(options.sweep_id);
  request.set_include_spec(options.spec);
  v1::Sweep sweep;
  grpc::Status status = connection.sweeps().GetSweep(connection.Context().get(), request, &sweep);
  if (!status.ok()) return connection.Error(status, absl::StrCat("sweep ", options.sweep_id));
  if (options.json) {
    out << ProtoJson(sweep) << "\n";
  } else if (options.spec) {
    out << sweep.spec_yaml();  // the file as submitted
  } else {
    out << "sweep " << sweep.sweep_id() << " (" << sweep.name() << ") "
        << SweepStateText(sweep.state()) << ", priority " << sweep.priority() << ", submitted "
        << LocalTime(sweep.submitted_ms()) << "\n"
        << sweep.trial_count() << " trials:";
    for (v1::TrialState state : AllTrialStates()) {
      auto found = sweep.trials_by_state().find(TrialStateText(state));
      if (found != sweep.trials_by_state().end())
        out << " " << found->first << " " << found->second;
    }
    out << "\n";
  }
  return absl::OkStatus();
}

namespace {

// A search trial's place in its search: "rung 2" (judged at 2 rungs), "rung 1, stopping" (pruned,
// still running), "confirm" (a confirm trial); "" in a plain grid.
std::string SearchText(const v1::Trial& trial) {
  if (trial.role() == "confirm") return "confirm";
  if (trial.role() != "search") return "";
  return absl::StrCat(
      "rung ", trial.rung(),
      trial.prune_requested() && trial.state() == v1::TRIAL_STATE_RUNNING ? ", stopping" : "");
}

}  // namespace

absl::Status ListTrials(Connection& connection, const TrialsOptions& options, std::ostream& out) {
  v1::ListTrialsRequest request;
  request.set_sweep_id(options.sweep_id);
  for (const std::string& name : options.states) {
    absl::StatusOr<v1::TrialState> state = ParseTrialStateText(name);
    if (!state.ok()) return state.status();
    request.add_states(*state);
  }
  request.set_page_size(1000);
  std::vector<v1::Trial> trials;
  for (;;) {
    v1::ListTrialsResponse response;
    grpc::Status status =
        connection.sweeps().ListTrials(connection.Context().get(), request, &response);
    if (!status.ok()) return connection.Error(status, "trials");
    trials.insert(trials.end(), response.trials().begin(), response.trials().end());
    if (response.next_page_token() == 0) break;
    request.set_page_token(response.next_page_token());
  }
  if (options.json) {
    out << ProtoJsonArray(trials) << "\n";
    return absl::OkStatus();
  }
  Table table;
  table.header = {"trial", "sweep", "state", "attempt"};
  table.header.insert(table.header.end(), kIdentityKnobs.begin(), kIdentityKnobs.end());
  table.header.insert(table.header.end(),
                      {"step", "train loss", "val loss", "worker", "scores", "search"});
  for (const v1::Trial& trial : trials) {
    const TrialConfig config = ConfigOf(trial);
    const TrialProgress progress = ProgressOf(trial, config);
    std::vector<std::string> row = {std::to_string(trial.trial_id()),
                                    std::to_string(trial.sweep_id()), TrialStateText(trial.state()),
                                    std::to_string(trial.attempt())};
    for (const char* key : kIdentityKnobs) row.push_back(config.KnobText(key));
    row.insert(row.end(), {progress.step < 0 ? "" : std::to_string(progress.step),
                           FormatNumber(progress.train_loss, 4), FormatNumber(progress.val_loss, 4),
                           trial.worker_id(),
                           trial.eval_of() > 0
                               ? absl::StrCat("#", trial.eval_of(), " at step ", trial.eval_step())
                               : "",
                           SearchText(trial)});
    table.rows.push_back(std::move(row));
  }
  out << RenderText(table);
  return absl::OkStatus();
}

absl::Status Resume(Connection& connection, int64_t trial_id, std::ostream& out) {
  v1::ResumeTrialRequest request;
  request.set_trial_id(trial_id);
  v1::Trial trial;
  grpc::Status status =
      connection.sweeps().ResumeTrial(connection.Context().get(), request, &trial);
  if (!status.ok()) return connection.Error(status, absl::StrCat("resume ", trial_id));
  out << "trial " << trial.trial_id() << " (sweep " << trial.sweep_id() << ") is "
      << TrialStateText(trial.state())
      << " again: it continues from its latest checkpoint, and its search no longer stops it\n";
  return absl::OkStatus();
}

absl::Status Cancel(Connection& connection, const CancelOptions& options, std::ostream& out) {
  v1::CancelResponse response;
  grpc::Status status;
  if (options.trial_id != 0) {
    v1::CancelTrialRequest request;
    request.set_trial_id(options.trial_id);
    status = connection.sweeps().CancelTrial(connection.Context().get(), request, &response);
  } else {
    v1::CancelSweepRequest request;
    request.set_sweep_id(options.sweep_id);
    status = connection.sweeps().CancelSweep(connection.Context().get(), request, &response);
  }
  if (!status.ok()) return connection.Error(status, "cancel");
  out << "cancelled " << response.cancelled_pending() << " pending trials; "
      << response.stopping_running() << " running trials are stopping\n";
  return absl::OkStatus();
}

absl::Status Logs(Connection& connection, const LogsOptions& options, std::ostream& out) {
  absl::StatusOr<v1::TrialLogs> fetched =
      FetchTrialLogs(connection, options.trial_id, options.events);
  if (!fetched.ok()) return fetched.status();
  const v1::TrialLogs& logs = *fetched;
  if (options.json) {
    out << ProtoJson(logs) << "\n";
    return absl::OkStatus();
  }
  const v1::Trial& trial = logs.trial();
  // Errors, configs, stderr and events carry text that submitters and trainers chose: no terminal
  // escape in them reaches the screen.
  out << "trial " << trial.trial_id() << " (sweep " << trial.sweep_id() << ") "
      << TrialStateText(trial.state()) << ", attempt " << trial.attempt()
      << (trial.error().empty() ? "" : ", error: " + PrintableLines(trial.error())) << "\n"
      << "config " << PrintableText(trial.config_json()) << "\n\n";
  Table attempts;
  attempts.header = {"attempt", "worker", "started", "ended", "outcome", "exit code"};
  for (const v1::AttemptInfo& attempt : logs.attempts()) {
    attempts.rows.push_back({std::to_string(attempt.attempt()), attempt.worker_id(),
                             LocalTime(attempt.started_ms()), LocalTime(attempt.ended_ms()),
                             attempt.outcome().empty() ? "running" : attempt.outcome(),
                             attempt.ended_ms() ? std::to_string(attempt.exit_code()) : ""});
  }
  out << RenderText(attempts);
  for (const v1::AttemptInfo& attempt : logs.attempts()) {
    if (attempt.stderr_tail().empty()) continue;
    out << "\n--- attempt " << attempt.attempt() << " stderr (last lines) ---\n"
        << PrintableLines(attempt.stderr_tail());
    if (attempt.stderr_tail().back() != '\n') out << "\n";
  }
  out << "\n--- events (latest " << logs.events_size() << ") ---\n";
  for (const v1::StoredEvent& event : logs.events()) {
    out << "[attempt " << event.attempt() << "] " << PrintableText(event.json()) << "\n";
  }
  return absl::OkStatus();
}

}  // namespace spheret::client
