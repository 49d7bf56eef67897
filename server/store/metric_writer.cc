// Metric ingestion on the writer thread: idempotent scalar rows, per-metric summaries updated
// from the rows that were new, superseding of older attempts' values past a resume point; the
// batch's per-layer values through LayerValueWriter.
#include <cmath>
#include <limits>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "server/store/sqlite_rows.h"

namespace spheret::store {
namespace {

// What one batch adds to a (trial, metric) summary.
struct SummaryDelta {
  double last = std::nan("");
  int64_t last_step = std::numeric_limits<int64_t>::min();
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();
  int64_t count = 0;
  int64_t first_step = std::numeric_limits<int64_t>::max();

  // Counts a row the batch stored (not a replay of a stored one).
  void Add(const MetricRow& row) {
    ++count;
    if (row.step >= last_step) {
      last_step = row.step;
      last = row.value;
    }
    if (std::isfinite(row.value)) {
      min = std::min(min, row.value);
      max = std::max(max, row.value);
    }
  }
};

// Adds a batch's delta to a metric's summary: its last value (by step), min, max and count.
constexpr char kUpsertSummary[] =
    "INSERT INTO summaries(trial_id, metric_id, last, min, max, count, last_step) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT(trial_id, metric_id) DO UPDATE "
    "SET last = CASE WHEN excluded.last_step >= last_step THEN excluded.last ELSE "
    "last END, last_step = max(last_step, excluded.last_step), min = "
    "coalesce(min(min, excluded.min), min, excluded.min), max = "
    "coalesce(max(max, excluded.max), max, excluded.max), count = count + "
    "excluded.count";

// Binds kUpsertSummary's parameters to `delta` (min and max NULL when no value was finite).
void BindSummary(Statement* summary, int64_t trial_id, int64_t metric_id,
                 const SummaryDelta& delta) {
  summary->Bind(1, trial_id).Bind(2, metric_id).Bind(3, delta.last);
  if (std::isfinite(delta.min)) {
    summary->Bind(4, delta.min).Bind(5, delta.max);
  } else {
    summary->BindNull(4).BindNull(5);
  }
  summary->Bind(6, delta.count).Bind(7, delta.last_step);
}

// A batch's stored events, zero-shot scores and checkpoint.
absl::Status StoreOtherEvents(Database& db, const EventBatchRecord& batch) {
  SPHERET_ASSIGN_OR_RETURN(
      Statement * event,
      db.Prepare("INSERT INTO events(trial_id, attempt, seq, json) VALUES (?1, ?2, ?3, ?4) "
                 "ON CONFLICT DO NOTHING"));
  for (const auto& [seq, line] : batch.other_events) {
    SPHERET_RETURN_IF_ERROR(
        event->Bind(1, batch.trial_id).Bind(2, batch.attempt).Bind(3, seq).Bind(4, line).Run());
  }
  for (const EvalRecord& eval : batch.evals) {
    SPHERET_RETURN_IF_ERROR(
        StoreEval(db, batch.evals_of > 0 ? batch.evals_of : batch.trial_id, eval));
  }
  if (batch.checkpoint_step > 0) {
    SPHERET_ASSIGN_OR_RETURN(
        Statement * checkpoint,
        db.Prepare("INSERT OR REPLACE INTO checkpoints(trial_id, step, attempt, path, written_ms) "
                   "VALUES (?1, ?2, ?3, ?4, strftime('%s', 'now') * 1000)"));
    SPHERET_RETURN_IF_ERROR(checkpoint->Bind(1, batch.trial_id)
                                .Bind(2, batch.checkpoint_step)
                                .Bind(3, batch.attempt)
                                .Bind(4, batch.checkpoint_path)
                                .Run());
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<int64_t> MetricWriter::MetricId(Database& db, const std::string& name) {
  auto found = metric_ids_.find(name);
  if (found != metric_ids_.end()) return found->second;
  SPHERET_ASSIGN_OR_RETURN(
      Statement * insert,
      db.Prepare("INSERT INTO metric_names(name) VALUES (?1) ON CONFLICT(name) DO NOTHING"));
  SPHERET_RETURN_IF_ERROR(insert->Bind(1, name).Run());
  SPHERET_ASSIGN_OR_RETURN(Statement * select,
                           db.Prepare("SELECT metric_id FROM metric_names WHERE name = ?1"));
  select->Bind(1, name);
  SPHERET_ASSIGN_OR_RETURN(bool row, select->Step());
  const int64_t id = row ? select->Int(0) : 0;
  select->Reset();
  if (!row) return absl::InternalError("metric name '" + name + "' vanished");
  pending_ids_.emplace_back(name, id);  // cached once the batch succeeded (see Append)
  return id;
}

absl::Status MetricWriter::Supersede(Database& db, int64_t trial_id, int attempt, int64_t metric_id,
                                     int64_t from_step) {
  if (attempt <= 1 || superseded_.count({trial_id, attempt, metric_id}) != 0) {
    return absl::OkStatus();
  }
  SPHERET_ASSIGN_OR_RETURN(
      Statement * update,
      db.Prepare("UPDATE scalars SET superseded = 1 WHERE trial_id = ?1 AND metric_id = ?2 AND "
                 "step >= ?3 AND attempt < ?4 AND superseded = 0"));
  SPHERET_RETURN_IF_ERROR(
      update->Bind(1, trial_id).Bind(2, metric_id).Bind(3, from_step).Bind(4, attempt).Run());
  pending_superseded_.emplace_back(trial_id, attempt, metric_id);
  return absl::OkStatus();
}

absl::Status MetricWriter::Append(Database& db, const EventBatchRecord& batch, int64_t* inserted) {
  pending_ids_.clear();
  pending_superseded_.clear();
  absl::Status status = AppendRows(db, batch, inserted);
  if (status.ok()) Commit();
  return status;
}

void MetricWriter::Forget() {
  metric_ids_.clear();
  superseded_.clear();
  layers_.Forget();
}

void MetricWriter::Commit() {
  for (auto& [name, id] : pending_ids_) metric_ids_[name] = id;
  for (auto& key : pending_superseded_) superseded_.insert(key);
  layers_.Commit();
}

absl::Status MetricWriter::AppendRows(Database& db, const EventBatchRecord& batch,
                                      int64_t* inserted) {
  SPHERET_ASSIGN_OR_RETURN(
      Statement * scalar,
      db.Prepare("INSERT INTO scalars(trial_id, metric_id, step, attempt, value, wall_ms) "
                 "VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT DO NOTHING"));
  std::unordered_map<int64_t, SummaryDelta> deltas;
  *inserted = 0;
  for (const MetricRow& row : batch.metrics) {
    SPHERET_ASSIGN_OR_RETURN(int64_t metric_id, MetricId(db, row.name));
    SummaryDelta& delta = deltas[metric_id];
    delta.first_step = std::min(delta.first_step, row.step);
    scalar->Bind(1, batch.trial_id).Bind(2, metric_id).Bind(3, row.step).Bind(4, batch.attempt);
    scalar->Bind(5, row.value).Bind(6, row.wall_ms);
    SPHERET_RETURN_IF_ERROR(scalar->Run());
    if (db.Changes() == 0) continue;  // a replay of a stored row
    ++*inserted;
    delta.Add(row);
  }
  SPHERET_ASSIGN_OR_RETURN(Statement * summary, db.Prepare(kUpsertSummary));
  for (const auto& [metric_id, delta] : deltas) {
    SPHERET_RETURN_IF_ERROR(
        Supersede(db, batch.trial_id, batch.attempt, metric_id, delta.first_step));
    if (delta.count == 0) continue;
    BindSummary(summary, batch.trial_id, metric_id, delta);
    SPHERET_RETURN_IF_ERROR(summary->Run());
  }
  SPHERET_RETURN_IF_ERROR(layers_.Append(db, batch));
  return StoreOtherEvents(db, batch);
}

}  // namespace spheret::store
