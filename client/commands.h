// The `spheret` subcommands. Each takes its options, writes its output to `out` and returns a
// Status whose message is one line naming the file, key or server at fault. main.cc reads flags
// and environment and calls these.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "client/connection.h"
#include "protocol/metric_catalog.h"
#include "protocol/trial_states.h"

namespace spheret::client {

struct SubmitOptions {
  std::string file;
  bool dry_run = false;
  bool wait = false;  // follow the sweep (as `watch`) until it ends
  bool json = false;
};
absl::Status Submit(Connection& connection, const SubmitOptions& options, std::ostream& out);

// Sweeps without their files, a page at a time.
absl::Status ListSweeps(Connection& connection, bool json, std::ostream& out);

struct SweepOptions {
  int64_t sweep_id = 0;
  bool spec = false;  // print the sweep file as submitted
  bool json = false;
};
absl::Status ShowSweep(Connection& connection, const SweepOptions& options, std::ostream& out);

struct TrialsOptions {
  int64_t sweep_id = 0;             // 0: every sweep
  std::vector<std::string> states;  // PENDING, RUNNING, ... (any case)
  bool json = false;
};
absl::Status ListTrials(Connection& connection, const TrialsOptions& options, std::ostream& out);

// Resumes a PRUNED trial (ResumeTrial).
absl::Status Resume(Connection& connection, int64_t trial_id, std::ostream& out);

struct CancelOptions {
  int64_t sweep_id = 0;
  int64_t trial_id = 0;  // set: cancel this trial only
};
absl::Status Cancel(Connection& connection, const CancelOptions& options, std::ostream& out);

// Zero-shot evaluation of finished trials as jobs on the workers (SweepService.EvaluateSweep).
struct EvalOptions {
  std::vector<std::string> sweeps;  // ids, names or globs (fetch.h)
  std::vector<int64_t> trials;      // only these trials (of the one sweep given)
  std::vector<std::string> where;   // knob=value, e.g. scale=L
  std::vector<std::string> tasks;   // task names, or "all" (the eleven)
  std::string data;                 // the tasks' folder, under the workers' --data-root
  bool dry_run = false;             // print the plan, schedule nothing
  bool wait = false;                // follow each sweep (as `watch`) until its jobs end
  bool json = false;
};
absl::Status Evaluate(Connection& connection, const EvalOptions& options, std::ostream& out);

struct LogsOptions {
  int64_t trial_id = 0;
  int events = 50;  // the latest N events
  bool json = false;
};
absl::Status Logs(Connection& connection, const LogsOptions& options, std::ostream& out);

struct WatchOptions {
  int64_t sweep_id = 0;
  bool live = true;  // redraw in place (a terminal); false: plain lines
};
absl::Status Watch(Connection& connection, const WatchOptions& options, std::ostream& out);

// results, report and plot read one or several sweeps: ids, names or globs of names (fetch.h).
struct ResultsOptions {
  std::vector<std::string> sweeps;
  std::vector<std::string> metrics = {protocol::kValLoss};
  std::string format = "table";
  std::vector<std::string> states = {TrialStateName(TrialState::kSucceeded)};
  bool vs_paper = false;
  std::string paper_dataset = "FineWeb-Edu";
  // A row label or method: every other row against it over seeds (client/report/baseline.h).
  std::string baseline;
  // Searches (a sweep file's search: block): tables show a sweep's confirm trials and leave its
  // search trials out once it has confirm trials, unless search_trials.
  bool search_trials = false;
  // --best-per KNOB,...: each group's best setting by its search (the first metric, lower is
  // better unless maximize) and its confirm trials' mean over their seeds (commands_best.cc).
  std::vector<std::string> best_per;
  bool maximize = false;
};
absl::Status Results(Connection& connection, const ResultsOptions& options, std::ostream& out);
absl::Status BestPer(Connection& connection, const ResultsOptions& options, std::ostream& out);

struct ReportOptions {
  std::vector<std::string> sweeps;
  std::string out_dir;
  bool vs_paper = false;
  std::string paper_dataset = "FineWeb-Edu";
  std::string gnuplot = "gnuplot";
  std::string baseline;  // as ResultsOptions::baseline: writes baseline.* too
  // The paper's outputs in its layout (table2 ... table5, figure2, figure3, all) instead of the
  // sweep report: one table is printed in `format` without out_dir, else written there.
  std::vector<std::string> paper;
  std::string format = "table";
  // The paper's claims tested (client/report/claims.h) instead of the sweep report: printed in
  // `format` (table, md, csv, json) without out_dir, else written there as claims.*.
  bool claims = false;
};
absl::Status Report(Connection& connection, const ReportOptions& options, std::ostream& out);
absl::Status PaperReport(Connection& connection, const ReportOptions& options, std::ostream& out);
absl::Status ClaimsReport(Connection& connection, const ReportOptions& options, std::ostream& out);

struct PlotCommandOptions {
  std::vector<std::string> sweeps;
  std::string metric = protocol::kValLoss;
  // A diag field (hidden_norm, theta, alpha, radial): plot it over depth, one point per
  // sublayer, its `diag_stat` over the training's diag steps (mean, max, min or last).
  std::string diag;
  std::string diag_stat = "mean";
  std::string out;
  std::string ylim;
  bool log_x = false;
  std::string gnuplot = "gnuplot";
};
absl::Status Plot(Connection& connection, const PlotCommandOptions& options, std::ostream& out);

struct SqlOptions {
  std::string db;  // the coordinator's SQLite file, opened read-only
  std::string query;
  std::string format = "table";
  int max_rows = 100000;
  // The query is stopped after this long: a long read holds a snapshot that keeps the
  // coordinator's WAL from being checkpointed.
  double timeout_s = 30;
};
absl::Status Sql(const SqlOptions& options, std::ostream& out);

struct TokensOptions {
  std::string action;     // create, list, revoke
  std::string role;       // create
  std::string name;       // create (label), revoke
  std::string worker_id;  // create: the worker a worker token speaks for (required for worker)
  std::string ttl;        // create: lifetime, seconds or N[smhd] ("30d"); "": never expires
  bool json = false;
};
absl::Status Tokens(Connection& connection, const TokensOptions& options, std::ostream& out);

}  // namespace spheret::client
