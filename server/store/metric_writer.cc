// Metric ingestion on the writer thread: per batch, one scalar_blocks row per metric with the
// values that were new (a replayed value is stored once), per-metric summaries updated from them,
// superseding of older attempts' values past a resume point; the batch's per-layer values through
// LayerValueWriter.
#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "server/store/packed_points.h"
#include "server/store/sqlite_rows.h"

namespace spheret::store {

// The rows of one metric of a batch, in the batch's order.
struct MetricGroup {
  int64_t metric_id = 0;
  std::vector<const MetricRow*> rows;
};

namespace {

// What one batch adds to a (trial, metric) summary.
struct SummaryDelta {
  double last = std::nan("");
  int64_t last_step = std::numeric_limits<int64_t>::min();
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();
  int64_t count = 0;
  int64_t first_step = std::numeric_limits<int64_t>::max();

  // Counts a value the batch stored (not a replay of a stored one).
  void Add(const PackedPoint& point) {
    ++count;
    if (point.step >= last_step) {
      last_step = point.step;
      last = point.value;
    }
    if (std::isfinite(point.value)) {
      min = std::min(min, point.value);
      max = std::max(max, point.value);
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

// Where a group's values go: trial, metric, attempt.
struct BlockKey {
  int64_t trial_id = 0;
  int64_t metric_id = 0;
  int attempt = 0;
};

// Adds to `steps` the steps of the stored values of `key` at or after `from_step`.
absl::Status StoredSteps(Database& db, const BlockKey& key, int64_t from_step,
                         std::unordered_set<int64_t>* steps) {
  SPHERET_ASSIGN_OR_RETURN(
      Statement * select,
      db.Prepare("SELECT points FROM scalar_blocks WHERE trial_id = ?1 AND metric_id = ?2 AND "
                 "attempt = ?3 AND last_step >= ?4"));
  select->Bind(1, key.trial_id).Bind(2, key.metric_id).Bind(3, key.attempt).Bind(4, from_step);
  std::vector<PackedPoint> points;
  for (;;) {
    SPHERET_ASSIGN_OR_RETURN(bool row, select->Step());
    if (!row) break;
    points.clear();
    absl::Status decoded = DecodePoints(select->TextView(0), 0, &points);
    if (!decoded.ok()) {
      select->Reset();
      return decoded;
    }
    for (const PackedPoint& point : points) steps->insert(point.step);
  }
  select->Reset();
  return absl::OkStatus();
}

// The values of `rows` that are not stored yet: of each step the batch's first, unless a stored
// block of `key` holds the step (the batch, or part of it, is a replay).
absl::StatusOr<std::vector<PackedPoint>> NewPoints(Database& db, const BlockKey& key,
                                                   const std::vector<const MetricRow*>& rows,
                                                   int64_t first_step) {
  bool increasing = true;
  for (size_t i = 1; i < rows.size() && increasing; ++i) {
    increasing = rows[i]->step > rows[i - 1]->step;
  }
  SPHERET_ASSIGN_OR_RETURN(
      Statement * last,
      db.Prepare("SELECT max(last_step) FROM scalar_blocks WHERE trial_id = ?1 AND "
                 "metric_id = ?2 AND attempt = ?3"));
  last->Bind(1, key.trial_id).Bind(2, key.metric_id).Bind(3, key.attempt);
  SPHERET_ASSIGN_OR_RETURN(bool row, last->Step());
  const bool overlaps = row && !last->IsNull(0) && last->Int(0) >= first_step;
  last->Reset();
  std::vector<PackedPoint> points;
  points.reserve(rows.size());
  std::unordered_set<int64_t> taken;
  if (overlaps) SPHERET_RETURN_IF_ERROR(StoredSteps(db, key, first_step, &taken));
  for (const MetricRow* metric : rows) {
    if ((increasing && !overlaps) || taken.insert(metric->step).second) {
      points.push_back({metric->step, metric->value, metric->wall_ms});
    }
  }
  return points;
}

// Stores `points` (not empty, steps unique) as one row of scalar_blocks.
absl::Status StoreBlock(Database& db, const BlockKey& key, const std::vector<PackedPoint>& points,
                        std::string* text) {
  int64_t first = points.front().step, last = first, wall = points.front().wall_ms;
  for (const PackedPoint& point : points) {
    first = std::min(first, point.step);
    last = std::max(last, point.step);
    wall = std::min(wall, point.wall_ms);
  }
  text->clear();
  EncodePoints(points, wall, text);
  SPHERET_ASSIGN_OR_RETURN(
      Statement * insert,
      db.Prepare("INSERT INTO scalar_blocks(trial_id, metric_id, attempt, first_step, last_step, "
                 "wall_ms, points) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"));
  insert->Bind(1, key.trial_id).Bind(2, key.metric_id).Bind(3, key.attempt);
  return insert->Bind(4, first).Bind(5, last).Bind(6, wall).Bind(7, std::string_view(*text)).Run();
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
      db.Prepare("UPDATE scalar_blocks SET superseded_from = ?3 WHERE trial_id = ?1 AND "
                 "metric_id = ?2 AND attempt < ?4 AND last_step >= ?3 AND "
                 "(superseded_from IS NULL OR superseded_from > ?3)"));
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

absl::StatusOr<std::vector<MetricGroup>> MetricWriter::Groups(Database& db,
                                                              const EventBatchRecord& batch) {
  std::vector<MetricGroup> groups;
  std::unordered_map<int64_t, size_t> group_of;  // metric_id -> its index in groups
  const std::string* name = nullptr;             // the previous row's metric, mostly the same
  size_t index = 0;
  for (const MetricRow& row : batch.metrics) {
    if (name == nullptr || *name != row.name) {
      SPHERET_ASSIGN_OR_RETURN(int64_t metric_id, MetricId(db, row.name));
      auto [at, added] = group_of.emplace(metric_id, groups.size());
      if (added) groups.push_back({metric_id, {}});
      index = at->second;
      name = &row.name;
    }
    groups[index].rows.push_back(&row);
  }
  return groups;
}

absl::Status MetricWriter::AppendRows(Database& db, const EventBatchRecord& batch,
                                      int64_t* inserted) {
  *inserted = 0;
  SPHERET_ASSIGN_OR_RETURN(std::vector<MetricGroup> groups, Groups(db, batch));
  SPHERET_ASSIGN_OR_RETURN(Statement * summary, db.Prepare(kUpsertSummary));
  std::string text;
  for (const MetricGroup& group : groups) {
    const BlockKey key{batch.trial_id, group.metric_id, batch.attempt};
    SummaryDelta delta;
    for (const MetricRow* row : group.rows)
      delta.first_step = std::min(delta.first_step, row->step);
    SPHERET_ASSIGN_OR_RETURN(std::vector<PackedPoint> points,
                             NewPoints(db, key, group.rows, delta.first_step));
    for (const PackedPoint& point : points) delta.Add(point);
    if (!points.empty()) SPHERET_RETURN_IF_ERROR(StoreBlock(db, key, points, &text));
    *inserted += static_cast<int64_t>(points.size());
    SPHERET_RETURN_IF_ERROR(
        Supersede(db, batch.trial_id, batch.attempt, group.metric_id, delta.first_step));
    if (delta.count == 0) continue;
    BindSummary(summary, batch.trial_id, group.metric_id, delta);
    SPHERET_RETURN_IF_ERROR(summary->Run());
  }
  SPHERET_RETURN_IF_ERROR(layers_.Append(db, batch));
  return StoreOtherEvents(db, batch);
}

}  // namespace spheret::store
