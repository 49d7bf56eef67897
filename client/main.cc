// spheret: the command line of a spheret coordinator.
//
//   spheret submit examples/depth-ablation.yaml --dry-run
//   spheret submit examples/depth-ablation.yaml --wait
//   spheret results 1 --metric val/loss --format md --vs-paper
//   spheret report 1 --out report/
//
// Exit codes: 0 done, 1 the command failed (one line on stderr says why), 2 bad command line.
#include <CLI/CLI.hpp>
#include <functional>
#include <iostream>

#include "absl/strings/str_join.h"
#include "base/printable.h"
#include "client/commands.h"
#include "client/proto_text.h"
#include "client/report/geometry.h"

namespace {

using spheret::client::Connection;

int Fail(const std::string& message, int code) {
  // Messages echo names and values others chose (a sweep's, a trial's): shown escaped.
  std::cerr << "spheret: error: " << spheret::PrintableLines(message) << "\n";
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  namespace client = spheret::client;
  CLI::App app{"spheret: submit, follow and report normalization-ablation sweeps"};
  app.require_subcommand(1);
  app.fallthrough();
  app.failure_message([](const CLI::App*, const CLI::Error& error) {
    return "spheret: error: " + std::string(error.what()) + " (see --help)\n";
  });
  client::ConnectionOptions connection_options;
  app.add_option("--coordinator", connection_options.address, "coordinator host:port")
      ->envname("SPHERET_COORDINATOR")
      ->capture_default_str();
  app.add_option("--token", connection_options.token, "API token (spheret tokens create)")
      ->envname("SPHERET_TOKEN");
  app.add_option("--tls-ca", connection_options.tls_ca_file, "CA certificate (PEM): use TLS")
      ->envname("SPHERET_TLS_CA");
  app.add_option("--tls-cert", connection_options.tls_cert_file,
                 "client certificate (PEM) for a coordinator that requires mTLS")
      ->envname("SPHERET_TLS_CERT");
  app.add_option("--tls-key", connection_options.tls_key_file, "client private key (PEM)")
      ->envname("SPHERET_TLS_KEY");
  app.add_option("--timeout", connection_options.timeout_s, "seconds per call")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();

  std::function<absl::Status(Connection&)> command;  // needs the coordinator
  std::function<absl::Status()> local_command;       // does not

  client::SubmitOptions submit;
  CLI::App* submit_cmd = app.add_subcommand("submit", "submit a sweep file");
  submit_cmd->add_option("file", submit.file, "sweep file (YAML)")->required();
  submit_cmd->add_flag("--dry-run", submit.dry_run, "print the expanded trials, submit nothing");
  submit_cmd->add_flag("--wait", submit.wait, "follow the sweep until it ends");
  submit_cmd->add_flag("--json", submit.json, "print JSON");
  submit_cmd->callback(
      [&] { command = [&](Connection& c) { return client::Submit(c, submit, std::cout); }; });

  bool sweeps_json = false;
  CLI::App* sweeps_cmd = app.add_subcommand("sweeps", "list sweeps");
  sweeps_cmd->add_flag("--json", sweeps_json, "print JSON");
  sweeps_cmd->callback([&] {
    command = [&](Connection& c) { return client::ListSweeps(c, sweeps_json, std::cout); };
  });

  client::SweepOptions sweep;
  CLI::App* sweep_cmd = app.add_subcommand("sweep", "one sweep: its state, or its file");
  sweep_cmd->add_option("sweep", sweep.sweep_id, "sweep id")->required();
  sweep_cmd->add_flag("--spec", sweep.spec, "print the sweep file as submitted");
  sweep_cmd->add_flag("--json", sweep.json, "print JSON");
  sweep_cmd->callback(
      [&] { command = [&](Connection& c) { return client::ShowSweep(c, sweep, std::cout); }; });

  client::TrialsOptions trials;
  CLI::App* trials_cmd = app.add_subcommand("trials", "list trials");
  trials_cmd->add_option("--sweep", trials.sweep_id, "only this sweep's trials");
  trials_cmd->add_option("--state", trials.states, "only trials in these states (repeatable)");
  trials_cmd->add_flag("--json", trials.json, "print JSON");
  trials_cmd->callback(
      [&] { command = [&](Connection& c) { return client::ListTrials(c, trials, std::cout); }; });

  client::WatchOptions watch;
  bool watch_plain = false;
  CLI::App* watch_cmd = app.add_subcommand("watch", "follow a sweep until it ends");
  watch_cmd->add_option("sweep", watch.sweep_id, "sweep id")->required();
  watch_cmd->add_flag("--plain", watch_plain, "plain lines even on a terminal");
  watch_cmd->callback([&] {
    watch.live = !watch_plain && client::IsTerminal(std::cout);
    command = [&](Connection& c) { return client::Watch(c, watch, std::cout); };
  });

  client::CancelOptions cancel;
  CLI::App* cancel_cmd = app.add_subcommand("cancel", "cancel a sweep (or one trial)");
  cancel_cmd->add_option("sweep", cancel.sweep_id, "sweep id");
  cancel_cmd->add_option("--trial", cancel.trial_id, "cancel only this trial");
  cancel_cmd->callback([&] {
    command = [&](Connection& c) -> absl::Status {
      if (cancel.sweep_id == 0 && cancel.trial_id == 0) {
        return absl::InvalidArgumentError("cancel: give a sweep id or --trial ID");
      }
      return client::Cancel(c, cancel, std::cout);
    };
  });

  int64_t resume_trial = 0;
  CLI::App* resume_cmd = app.add_subcommand(
      "resume", "resume a PRUNED trial from its checkpoint (its search no longer stops it)");
  resume_cmd->add_option("trial", resume_trial, "trial id")->required();
  resume_cmd->callback(
      [&] { command = [&](Connection& c) { return client::Resume(c, resume_trial, std::cout); }; });

  client::LogsOptions logs;
  CLI::App* logs_cmd = app.add_subcommand("logs", "a trial's attempts, stderr tails and events");
  logs_cmd->add_option("trial", logs.trial_id, "trial id")->required();
  logs_cmd->add_option("--events", logs.events, "how many of the latest events")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  logs_cmd->add_flag("--json", logs.json, "print JSON");
  logs_cmd->callback(
      [&] { command = [&](Connection& c) { return client::Logs(c, logs, std::cout); }; });

  client::EvalOptions eval;
  CLI::App* eval_cmd = app.add_subcommand(
      "eval", "zero-shot scores of finished trials' checkpoints, as jobs on the workers");
  eval_cmd->add_option("sweeps", eval.sweeps, "sweep ids, names or globs of names")->required();
  eval_cmd->add_option("--tasks", eval.tasks, "tasks, comma-separated, or all (the eleven)")
      ->required()
      ->delimiter(',')
      ->allow_extra_args(false);
  eval_cmd
      ->add_option("--data", eval.data,
                   "the tasks' folder (relative: under the workers' --data-root)")
      ->required();
  eval_cmd->add_option("--trials", eval.trials, "only these trials (comma-separated)")
      ->delimiter(',')
      ->allow_extra_args(false);
  eval_cmd->add_option("--where", eval.where, "only trials with knob=value (repeatable)")
      ->allow_extra_args(false);
  eval_cmd->add_flag("--dry-run", eval.dry_run, "print what would be scheduled");
  eval_cmd->add_flag("--wait", eval.wait, "follow the sweeps until their jobs end");
  eval_cmd->add_flag("--json", eval.json, "print the coordinator's answer as JSON");
  eval_cmd->callback(
      [&] { command = [&](Connection& c) { return client::Evaluate(c, eval, std::cout); }; });

  client::ResultsOptions results;
  std::string results_paper;
  CLI::App* results_cmd =
      app.add_subcommand("results", "final metrics, mean ± std [95% CI] (n) over seeds");
  results_cmd->add_option("sweeps", results.sweeps, "sweep ids, names or globs of names")
      ->required();
  results_cmd->add_option("--metric", results.metrics, "metric (repeatable)")
      ->capture_default_str();
  results_cmd->add_option("--format", results.format, "table, csv, json, md or latex")
      ->capture_default_str();
  results_cmd->add_option("--state", results.states, "count trials in these states")
      ->capture_default_str();
  results_cmd->add_flag("--vs-paper", results.vs_paper, "the paper's numbers beside ours");
  results_cmd->add_option("--paper-dataset", results.paper_dataset, "FineWeb-Edu or OpenWebText")
      ->capture_default_str();
  results_cmd->add_option("--baseline", results.baseline,
                          "a method or row: every other row's difference to it over seeds, with "
                          "its 95% CI and p (paired t test, Welch when seeds differ); CSV and "
                          "JSON print only that comparison");
  results_cmd
      ->add_option("--best-per", results.best_per,
                   "searches: each group's best setting (by the first --metric) and its confirm "
                   "trials' mean ± std [95% CI] over their seeds, e.g. --best-per method")
      ->delimiter(',')
      ->allow_extra_args(false);
  results_cmd->add_flag("--maximize", results.maximize, "with --best-per: higher is better");
  results_cmd->add_flag("--search-trials", results.search_trials,
                        "count a search's trials too when it has confirm trials");
  results_cmd->callback(
      [&] { command = [&](Connection& c) { return client::Results(c, results, std::cout); }; });

  client::ReportOptions report;
  CLI::App* report_cmd = app.add_subcommand("report", "write the paper's tables and figures");
  report_cmd->add_option("sweeps", report.sweeps, "sweep ids, names or globs of names")->required();
  report_cmd->add_option("--out", report.out_dir,
                         "folder to write (optional with one --paper table)");
  report_cmd
      ->add_option("--paper", report.paper,
                   "the paper's layout: table2, table3, table4, table5, figure2, figure3 or "
                   "all (repeatable: --paper table2 --paper table3)")
      ->allow_extra_args(false);
  report_cmd->add_flag("--claims", report.claims,
                       "the paper's claims tested: effect, 95% CI, test, confounds, verdict "
                       "(claims.{txt,md,csv,json} with --out)");
  report_cmd
      ->add_option("--format", report.format,
                   "with --paper or --claims and no --out: table, csv, json, "
                   "md or latex (not with --claims)")
      ->capture_default_str();
  report_cmd->add_flag("--vs-paper", report.vs_paper, "the paper's numbers beside ours");
  report_cmd->add_option("--paper-dataset", report.paper_dataset, "FineWeb-Edu or OpenWebText")
      ->capture_default_str();
  report_cmd->add_option("--gnuplot", report.gnuplot, "gnuplot program")->capture_default_str();
  report_cmd->add_option("--baseline", report.baseline,
                         "a method or row: writes baseline.*, every other row against it");
  report_cmd->callback([&] {
    command = [&](Connection& c) {
      return report.claims ? client::ClaimsReport(c, report, std::cout)
                           : client::Report(c, report, std::cout);
    };
  });

  client::PlotCommandOptions plot;
  CLI::App* plot_cmd = app.add_subcommand("plot", "curves per method, one panel per scale");
  plot_cmd->add_option("sweeps", plot.sweeps, "sweep ids, names or globs of names")->required();
  plot_cmd->add_option("--metric", plot.metric, "metric")->capture_default_str();
  plot_cmd->add_option("--diag", plot.diag,
                       "a per-layer field by name, over depth (a model-level field such as "
                       "delta_sum over training), e.g. " +
                           absl::StrJoin(client::DiagFields(), ", "));
  plot_cmd->add_option("--diag-stat", plot.diag_stat, "of each sublayer over training")
      ->check(CLI::IsMember({"mean", "max", "min", "last"}))
      ->capture_default_str();
  plot_cmd->add_option("--out", plot.out, "FILE.png or FILE.svg")->required();
  plot_cmd->add_option("--ylim", plot.ylim, "y range lo:hi");
  plot_cmd->add_flag("--log-x", plot.log_x, "logarithmic steps");
  plot_cmd->add_option("--gnuplot", plot.gnuplot, "gnuplot program")->capture_default_str();
  plot_cmd->callback(
      [&] { command = [&](Connection& c) { return client::Plot(c, plot, std::cout); }; });

  client::SqlOptions sql;
  sql.db = "spheret.db";
  CLI::App* sql_cmd = app.add_subcommand("sql", "one read-only SELECT on the database");
  sql_cmd->add_option("query", sql.query, "SELECT ...")->required();
  sql_cmd->add_option("--db", sql.db, "the coordinator's database file")
      ->envname("SPHERET_DB")
      ->capture_default_str();
  sql_cmd->add_option("--format", sql.format, "table, csv, json, md or latex")
      ->capture_default_str();
  sql_cmd->add_option("--max-rows", sql.max_rows, "refuse larger results")->capture_default_str();
  sql_cmd->add_option("--timeout", sql.timeout_s, "stop the query after this many seconds")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sql_cmd->callback([&] { local_command = [&] { return client::Sql(sql, std::cout); }; });

  client::TokensOptions tokens;
  CLI::App* tokens_cmd = app.add_subcommand("tokens", "API tokens (admin)");
  tokens_cmd->require_subcommand(1);
  CLI::App* create_cmd = tokens_cmd->add_subcommand("create", "create a token, print it once");
  create_cmd->add_option("role", tokens.role, absl::StrJoin(client::RoleNames(), ", "))
      ->required()
      ->check(CLI::IsMember(client::RoleNames()));
  create_cmd->add_option("--name", tokens.name, "a label");
  create_cmd->add_option("--worker-id", tokens.worker_id,
                         "the worker a worker token speaks for (required for role worker)");
  create_cmd->add_option("--ttl", tokens.ttl,
                         "expire the token after this long: seconds, or e.g. 90m, 12h, 30d");
  create_cmd->add_flag("--json", tokens.json, "print JSON");
  CLI::App* list_cmd = tokens_cmd->add_subcommand("list", "list tokens (names, roles)");
  list_cmd->add_flag("--json", tokens.json, "print JSON");
  CLI::App* revoke_cmd = tokens_cmd->add_subcommand("revoke", "delete the tokens with a name");
  revoke_cmd->add_option("name", tokens.name, "token name")->required();
  for (CLI::App* sub : {create_cmd, list_cmd, revoke_cmd}) {
    sub->callback([&, sub] {
      tokens.action = sub->get_name();
      command = [&](Connection& c) { return client::Tokens(c, tokens, std::cout); };
    });
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    const int code = app.exit(error);
    return code == 0 ? 0 : 2;
  }
  absl::Status status;
  if (local_command) {
    status = local_command();
  } else {
    absl::StatusOr<std::unique_ptr<Connection>> connection = Connection::Open(connection_options);
    status = connection.ok() ? command(**connection) : connection.status();
  }
  if (!status.ok()) return Fail(std::string(status.message()), 1);
  return 0;
}
