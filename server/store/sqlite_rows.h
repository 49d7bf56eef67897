// The SQL of the SQLite store, one function per read or write, each on a given connection (the
// writer's inside its transaction, or a reader's). Internal to server/store.
#pragma once

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "server/store/sqlite_db.h"
#include "server/store/store.h"

namespace spheret::store {

// Rows of a prepared statement, converted by `convert`.
template <typename T, typename F>
absl::StatusOr<std::vector<T>> Rows(Statement* statement, F convert) {
  std::vector<T> rows;
  for (;;) {
    absl::StatusOr<bool> row = statement->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    rows.push_back(convert(*statement));
  }
  statement->Reset();
  return rows;
}

absl::Status SubmitInTransaction(Database& db, const SweepRecord& sweep,
                                 const std::vector<TrialSpec>& trials, int64_t now_ms,
                                 SubmitOutcome* outcome);
absl::Status WriteChanges(Database& db, const Changes& changes, int64_t now_ms);

absl::StatusOr<RestoredState> LoadStateFrom(Database& db);
// Sweeps matching `where` (with ?1 bound to `value`), by id, at most `limit`; without their
// spec_yaml (ReadSweepSpec reads one).
absl::StatusOr<std::vector<SweepRecord>> ReadSweeps(Database& db, const std::string& where,
                                                    int64_t value, int limit);
// One sweep's file as submitted; NotFound when there is no such sweep.
absl::StatusOr<std::string> ReadSweepSpec(Database& db, int64_t sweep_id);
absl::StatusOr<std::vector<TrialRecord>> ReadTrials(Database& db, const TrialQuery& query);
absl::StatusOr<std::map<std::string, MetricSummary>> ReadSummaries(Database& db, int64_t trial_id);

// Reads for the CLI's logs, results, reports and plots, and token administration
// (sqlite_reads.cc).
absl::StatusOr<std::vector<AttemptRecord>> ReadAttempts(Database& db, int64_t trial_id);
absl::StatusOr<EventPage> ReadEvents(Database& db, int64_t trial_id, const EventPageQuery& query);
absl::StatusOr<std::vector<EvalRecord>> ReadEvals(Database& db, int64_t trial_id);
absl::StatusOr<CurveRecord> ReadCurve(Database& db, int64_t trial_id, const std::string& metric);
absl::StatusOr<std::vector<LayerSeries>> ReadLayerValues(Database& db, int64_t trial_id,
                                                         const LayerValueQuery& query);
absl::StatusOr<std::vector<TokenRecord>> ReadTokens(Database& db, int64_t after, int limit);
// ASHA's judgements of a sweep (0: every sweep), by sweep, group, rung and trial.
absl::StatusOr<std::vector<RungValue>> ReadRungValues(Database& db, int64_t sweep_id);
// Stores one zero-shot score (a rerun of the same task and metric replaces it).
absl::Status StoreEval(Database& db, int64_t trial_id, const EvalRecord& eval);

// Per-layer value ingestion (layer_writer.cc): idempotent rows of layer_values, and superseding
// of older attempts' values past a resume point. Keeps the field-name ids and which (trial,
// attempt, field) already superseded; used from the writer thread only, inside the savepoint of
// MetricWriter::Append, which commits or forgets what it learned.
class LayerValueWriter {
 public:
  absl::Status Append(Database& db, const EventBatchRecord& batch);
  void Commit();  // the batch succeeded: keep what it learned
  void Forget();  // drop everything cached
 private:
  absl::StatusOr<int64_t> FieldId(Database& db, const std::string& name);
  absl::Status Supersede(Database& db, int64_t trial_id, int attempt, int64_t field_id,
                         int64_t from_step);

  std::unordered_map<std::string, int64_t> field_ids_;
  std::set<std::tuple<int64_t, int, int64_t>> superseded_;
  std::vector<std::pair<std::string, int64_t>> pending_ids_;
  std::vector<std::tuple<int64_t, int, int64_t>> pending_superseded_;
};

struct MetricGroup;  // the rows of one metric of a batch (metric_writer.cc)

// Metric ingestion (with the batch's per-layer values). Keeps the metric-name ids and which (trial,
// attempt, metric) already superseded older attempts; used from the writer thread only.
class MetricWriter {
 public:
  // Runs inside the writer's savepoint. The caches learn from a batch only when it succeeded;
  // a batch that fails is rolled back and leaves them as they were.
  absl::Status Append(Database& db, const EventBatchRecord& batch, int64_t* inserted);
  // Forgets everything cached: the transaction holding the last batches did not commit.
  void Forget();

 private:
  absl::Status AppendRows(Database& db, const EventBatchRecord& batch, int64_t* inserted);
  // The batch's rows by metric (MetricGroup in metric_writer.cc), in order of first appearance.
  absl::StatusOr<std::vector<MetricGroup>> Groups(Database& db, const EventBatchRecord& batch);
  absl::StatusOr<int64_t> MetricId(Database& db, const std::string& name);
  absl::Status Supersede(Database& db, int64_t trial_id, int attempt, int64_t metric_id,
                         int64_t from_step);
  void Commit();

  LayerValueWriter layers_;
  std::unordered_map<std::string, int64_t> metric_ids_;
  std::set<std::tuple<int64_t, int, int64_t>> superseded_;
  std::vector<std::pair<std::string, int64_t>> pending_ids_;
  std::vector<std::tuple<int64_t, int, int64_t>> pending_superseded_;
};

}  // namespace spheret::store
