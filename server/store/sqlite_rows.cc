#include "server/store/sqlite_rows.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "protocol/metric_catalog.h"

namespace spheret::store {
namespace {

using nlohmann::json;

std::vector<int> ParseInts(const std::string& text) {
  json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
  std::vector<int> values;
  if (!parsed.is_array()) return values;
  for (const json& v : parsed) {
    if (v.is_number_integer()) values.push_back(v.get<int>());
  }
  return values;
}

// The sweep file is read only for one sweep (ReadSweepSpec): lists and the scheduler's state
// leave it out, so no read holds every file at once.
constexpr char kSweepColumns[] =
    "SELECT sweep_id, name, '', coalesce(idempotency_key, ''), priority, max_restarts, "
    "gpus, slots_per_node, nodes, metric, minimize, state, submitted_ms, search FROM sweeps ";

// The sweep's search settings as stored (sweeps.search): "" for none.
std::string SearchText(const SearchSettings& search) {
  if (search.strategy.empty()) return "";
  return json{{"strategy", search.strategy},
              {"metric", search.metric},
              {"minimize", search.minimize},
              {"min_iters", search.min_iters},
              {"reduction_factor", search.reduction_factor},
              {"confirm_seeds", search.confirm_seeds},
              {"confirm_top", search.confirm_top}}
      .dump();
}

SearchSettings SearchFromText(const std::string& text) {
  SearchSettings search;
  const json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_object()) return search;
  search.strategy = parsed.value("strategy", "");
  search.metric = parsed.value("metric", protocol::kValLoss);
  search.minimize = parsed.value("minimize", true);
  search.min_iters = parsed.value("min_iters", int64_t{0});
  search.reduction_factor = parsed.value("reduction_factor", 3);
  search.confirm_seeds = parsed.value("confirm_seeds", std::vector<int64_t>{});
  search.confirm_top = parsed.value("confirm_top", 1);
  return search;
}

SweepRecord SweepFromRow(const Statement& row) {
  SweepRecord sweep;
  sweep.sweep_id = row.Int(0);
  sweep.name = row.Text(1);
  sweep.spec_yaml = row.Text(2);
  sweep.idempotency_key = row.Text(3);
  sweep.priority = static_cast<int>(row.Int(4));
  sweep.max_restarts = static_cast<int>(row.Int(5));
  sweep.gpus = static_cast<int>(row.Int(6));
  sweep.slots_per_node = static_cast<int>(row.Int(7));
  sweep.nodes = static_cast<int>(row.Int(8));
  sweep.metric = row.Text(9);
  sweep.minimize = row.Int(10) != 0;
  sweep.state = ParseSweepState(row.Text(11)).value_or(SweepState::kActive);
  sweep.submitted_ms = row.Int(12);
  sweep.search = SearchFromText(row.Text(13));
  return sweep;
}

constexpr char kTrialColumns[] =
    "SELECT trial_id, sweep_id, trial_key, config_json, state, attempt, priority, "
    "cancel_requested, not_before_ms, created_ms, error, failures, eval_of, eval_step, role, "
    "search_group, rung, prune_requested, prune_exempt FROM trials ";

TrialRecord TrialFromRow(const Statement& row) {
  TrialRecord trial;
  trial.trial_id = row.Int(0);
  trial.sweep_id = row.Int(1);
  trial.trial_key = row.Text(2);
  trial.config_json = row.Text(3);
  trial.state = ParseTrialState(row.Text(4)).value_or(TrialState::kPending);
  trial.attempt = static_cast<int>(row.Int(5));
  trial.priority = static_cast<int>(row.Int(6));
  trial.cancel_requested = row.Int(7) != 0;
  trial.not_before_ms = row.Int(8);
  trial.created_ms = row.Int(9);
  trial.error = row.Text(10);
  trial.failures = static_cast<int>(row.Int(11));
  trial.eval_of = row.Int(12);
  trial.eval_step = row.Int(13);
  trial.role = row.Text(14);
  trial.search_group = row.Text(15);
  trial.rung = static_cast<int>(row.Int(16));
  trial.prune_requested = row.Int(17) != 0;
  trial.prune_exempt = row.Int(18) != 0;
  return trial;
}

// The sweep-level settings in which `stored` and `submitted` differ ("" when none): a file
// submitted under an existing name may extend the sweep's grid, nothing else.
std::string SettingsDiffer(const SweepRecord& stored, const SweepRecord& submitted) {
  std::vector<std::string> differ;
  const auto compare = [&](const char* what, const auto& was, const auto& now) {
    if (!(was == now)) differ.push_back(absl::StrCat(what, " ", was, " -> ", now));
  };
  compare("resources.gpus", stored.gpus, submitted.gpus);
  compare("slots per node", stored.slots_per_node, submitted.slots_per_node);
  compare("resources.nodes", stored.nodes, submitted.nodes);
  compare("priority", stored.priority, submitted.priority);
  compare("max_restarts", stored.max_restarts, submitted.max_restarts);
  compare("metric.name", stored.metric, submitted.metric);
  compare("metric.goal", std::string(stored.minimize ? "minimize" : "maximize"),
          std::string(submitted.minimize ? "minimize" : "maximize"));
  compare("search", SearchText(stored.search), SearchText(submitted.search));
  return absl::StrJoin(differ, ", ");
}

absl::StatusOr<SweepRecord> FindOrInsertSweep(Database& db, const SweepRecord& sweep,
                                              int64_t now_ms) {
  SPHERET_ASSIGN_OR_RETURN(Statement * find,
                           db.Prepare(std::string(kSweepColumns) +
                                      "WHERE (idempotency_key = ?1 AND ?1 != '') OR name = ?2 "
                                      "ORDER BY idempotency_key = ?1 DESC LIMIT 1"));
  find->Bind(1, sweep.idempotency_key).Bind(2, sweep.name);
  SPHERET_ASSIGN_OR_RETURN(auto existing, Rows<SweepRecord>(find, SweepFromRow));
  if (!existing.empty()) {
    const SweepRecord& found = existing.front();
    const bool same_key =
        !sweep.idempotency_key.empty() && found.idempotency_key == sweep.idempotency_key;
    if (std::string differ = SettingsDiffer(found, sweep); !same_key && !differ.empty()) {
      return absl::AlreadyExistsError(
          absl::StrCat("sweep '", sweep.name, "' (sweep ", found.sweep_id,
                       ") exists with other settings (", differ,
                       "); a file under an existing name may only add trials to its grid: give it "
                       "another name to submit it as a new sweep"));
    }
    return found;
  }
  SPHERET_ASSIGN_OR_RETURN(
      Statement * insert,
      db.Prepare(
          "INSERT INTO sweeps(name, spec_yaml, idempotency_key, priority, max_restarts, "
          "gpus, slots_per_node, nodes, metric, minimize, state, submitted_ms, search) VALUES "
          "(?1, ?2, nullif(?3, ''), ?4, ?5, ?6, ?7, ?8, ?9, ?10, 'ACTIVE', ?11, ?12)"));
  insert->Bind(1, sweep.name).Bind(2, sweep.spec_yaml).Bind(3, sweep.idempotency_key);
  insert->Bind(4, sweep.priority).Bind(5, sweep.max_restarts).Bind(6, sweep.gpus);
  insert->Bind(7, sweep.slots_per_node).Bind(8, sweep.nodes).Bind(9, sweep.metric);
  insert->Bind(10, static_cast<int64_t>(sweep.minimize)).Bind(11, now_ms);
  insert->Bind(12, SearchText(sweep.search));
  SPHERET_RETURN_IF_ERROR(insert->Run());
  SweepRecord created = sweep;
  created.spec_yaml.clear();  // as a read returns it
  created.sweep_id = db.LastInsertId();
  created.submitted_ms = now_ms;
  created.state = SweepState::kActive;
  return created;
}

}  // namespace

absl::Status SubmitInTransaction(Database& db, const SweepRecord& sweep,
                                 const std::vector<TrialSpec>& trials, int64_t now_ms,
                                 SubmitOutcome* outcome) {
  SPHERET_ASSIGN_OR_RETURN(outcome->sweep, FindOrInsertSweep(db, sweep, now_ms));
  const SweepRecord& stored = outcome->sweep;
  SPHERET_ASSIGN_OR_RETURN(
      Statement * insert,
      db.Prepare("INSERT INTO trials(sweep_id, trial_key, config_json, state, priority, "
                 "created_ms, eval_of, eval_step, role, search_group) VALUES (?1, ?2, ?3, ?4, ?5, "
                 "?6, ?7, ?8, ?9, ?10) ON CONFLICT(sweep_id, trial_key) DO NOTHING"));
  // New trials of a finished sweep reopen it; a cancelled sweep stays cancelled.
  const TrialState initial =
      stored.state == SweepState::kCancelled ? TrialState::kCancelled : TrialState::kPending;
  for (const TrialSpec& spec : trials) {
    insert->Bind(1, stored.sweep_id).Bind(2, spec.trial_key).Bind(3, spec.config_json);
    insert->Bind(4, TrialStateName(initial)).Bind(5, stored.priority).Bind(6, now_ms);
    insert->Bind(7, spec.eval_of).Bind(8, spec.eval_step).Bind(9, spec.role);
    insert->Bind(10, spec.search_group);
    SPHERET_RETURN_IF_ERROR(insert->Run());
    if (db.Changes() == 0) continue;
    TrialRecord trial;
    trial.trial_id = db.LastInsertId();
    trial.sweep_id = stored.sweep_id;
    trial.trial_key = spec.trial_key;
    trial.config_json = spec.config_json;
    trial.state = initial;
    trial.priority = stored.priority;
    trial.created_ms = now_ms;
    trial.eval_of = spec.eval_of;
    trial.eval_step = spec.eval_step;
    trial.role = spec.role;
    trial.search_group = spec.search_group;
    outcome->created.push_back(std::move(trial));
  }
  if (!outcome->created.empty() && stored.state == SweepState::kDone) {
    SPHERET_RETURN_IF_ERROR(db.Exec(
        absl::StrCat("UPDATE sweeps SET state = 'ACTIVE' WHERE sweep_id = ", stored.sweep_id)));
    outcome->sweep.state = SweepState::kActive;
  }
  SPHERET_ASSIGN_OR_RETURN(
      outcome->trial_count,
      db.QueryInt(absl::StrCat("SELECT count(*) FROM trials WHERE sweep_id = ", stored.sweep_id)));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<SweepRecord>> ReadSweeps(Database& db, const std::string& where,
                                                    int64_t value, int limit) {
  SPHERET_ASSIGN_OR_RETURN(Statement * statement, db.Prepare(std::string(kSweepColumns) + where +
                                                             " ORDER BY sweep_id LIMIT ?2"));
  statement->Bind(1, value).Bind(2, static_cast<int64_t>(limit));
  return Rows<SweepRecord>(statement, SweepFromRow);
}

absl::StatusOr<std::string> ReadSweepSpec(Database& db, int64_t sweep_id) {
  SPHERET_ASSIGN_OR_RETURN(Statement * statement,
                           db.Prepare("SELECT spec_yaml FROM sweeps WHERE sweep_id = ?1"));
  statement->Bind(1, sweep_id);
  SPHERET_ASSIGN_OR_RETURN(
      auto specs, Rows<std::string>(statement, [](const Statement& r) { return r.Text(0); }));
  if (specs.empty()) return absl::NotFoundError(absl::StrCat("no sweep ", sweep_id));
  return specs.front();
}

absl::StatusOr<std::vector<TrialRecord>> ReadTrials(Database& db, const TrialQuery& query) {
  std::string states;
  for (TrialState state : query.states) {
    absl::StrAppend(&states, states.empty() ? "'" : ", '", TrialStateName(state), "'");
  }
  const std::string sql =
      absl::StrCat(kTrialColumns, "WHERE trial_id > ?1 AND (?2 = 0 OR sweep_id = ?2)",
                   states.empty() ? "" : absl::StrCat(" AND state IN (", states, ")"),
                   query.trainings_only ? " AND eval_of = 0" : "", " ORDER BY trial_id LIMIT ?3");
  SPHERET_ASSIGN_OR_RETURN(Statement * statement, db.Prepare(sql));
  statement->Bind(1, query.after_trial_id).Bind(2, query.sweep_id);
  statement->Bind(3, static_cast<int64_t>(query.limit));
  return Rows<TrialRecord>(statement, TrialFromRow);
}

absl::StatusOr<std::map<std::string, MetricSummary>> ReadSummaries(Database& db, int64_t trial_id) {
  SPHERET_ASSIGN_OR_RETURN(
      Statement * statement,
      db.Prepare("SELECT m.name, s.last, s.min, s.max, s.count, s.last_step FROM summaries s "
                 "JOIN metric_names m USING (metric_id) WHERE s.trial_id = ?1"));
  statement->Bind(1, trial_id);
  std::map<std::string, MetricSummary> summaries;
  SPHERET_ASSIGN_OR_RETURN(
      auto rows, (Rows<std::pair<std::string, MetricSummary>>(statement, [](const Statement& r) {
        const double nan = std::nan("");
        return std::make_pair(
            r.Text(0), MetricSummary{r.IsNull(1) ? nan : r.Real(1), r.IsNull(2) ? nan : r.Real(2),
                                     r.IsNull(3) ? nan : r.Real(3), r.Int(4), r.Int(5)});
      })));
  for (auto& [name, summary] : rows) summaries[name] = summary;
  return summaries;
}

namespace {

// A row of `SELECT trial_id, attempt, worker_id, node_rank, slots_json, expires_ms, delivered,
// master_addr, master_port, nodes, slots_per_node, ranks_per_node FROM leases`.
LeaseRecord LeaseFromRow(const Statement& r) {
  return LeaseRecord{r.Int(0),
                     static_cast<int>(r.Int(1)),
                     r.Text(2),
                     static_cast<int>(r.Int(3)),
                     ParseInts(r.Text(4)),
                     r.Int(5),
                     r.Int(6) != 0,
                     Rendezvous{r.Text(7), static_cast<int>(r.Int(8)), static_cast<int>(r.Int(9)),
                                static_cast<int>(r.Int(10)), static_cast<int>(r.Int(11))}};
}

// A row of `SELECT worker_id, host, gpus_json, gpu_names, cpu_slots, version, registered_ms,
// last_seen_ms FROM workers`.
WorkerRecord WorkerFromRow(const Statement& r) {
  WorkerRecord w;
  w.worker_id = r.Text(0);
  w.host = r.Text(1);
  w.gpus = ParseInts(r.Text(2));
  json names = json::parse(r.Text(3), nullptr, false);
  if (names.is_array()) {
    for (const json& n : names) w.gpu_names.push_back(n.is_string() ? n.get<std::string>() : "");
  }
  w.cpu_slots = static_cast<int>(r.Int(4));
  w.version = r.Text(5);
  w.registered_ms = r.Int(6);
  w.last_seen_ms = r.Int(7);
  return w;
}

}  // namespace

absl::StatusOr<RestoredState> LoadStateFrom(Database& db) {
  RestoredState state;
  SPHERET_ASSIGN_OR_RETURN(state.sweeps, ReadSweeps(db, "WHERE sweep_id > ?1", 0, INT32_MAX));
  SPHERET_ASSIGN_OR_RETURN(Statement * trials,
                           db.Prepare(std::string(kTrialColumns) +
                                      "WHERE state IN ('PENDING', 'RUNNING') ORDER BY trial_id"));
  SPHERET_ASSIGN_OR_RETURN(state.live_trials, Rows<TrialRecord>(trials, TrialFromRow));
  SPHERET_ASSIGN_OR_RETURN(
      Statement * leases,
      db.Prepare(
          "SELECT trial_id, attempt, worker_id, node_rank, slots_json, expires_ms, "
          "delivered, master_addr, master_port, nodes, slots_per_node, ranks_per_node FROM leases "
          "ORDER BY trial_id, node_rank"));
  SPHERET_ASSIGN_OR_RETURN(state.leases, Rows<LeaseRecord>(leases, LeaseFromRow));
  SPHERET_ASSIGN_OR_RETURN(
      Statement * workers,
      db.Prepare("SELECT worker_id, host, gpus_json, gpu_names, cpu_slots, version, "
                 "registered_ms, last_seen_ms FROM workers"));
  SPHERET_ASSIGN_OR_RETURN(state.workers, Rows<WorkerRecord>(workers, WorkerFromRow));
  SPHERET_ASSIGN_OR_RETURN(state.last_alive_ms,
                           db.QueryInt("SELECT coalesce(max(value), 0) FROM coordinator_state "
                                       "WHERE key = 'last_alive_ms'"));
  return state;
}

}  // namespace spheret::store
