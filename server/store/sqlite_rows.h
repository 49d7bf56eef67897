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

absl::Status SubmitInTransaction(Database& db, const SweepRecord& sweep,
                                 const std::vector<TrialSpec>& trials, int64_t now_ms,
                                 SubmitOutcome* outcome);
absl::Status WriteChanges(Database& db, const Changes& changes, int64_t now_ms);

absl::StatusOr<RestoredState> LoadStateFrom(Database& db);
// Sweeps matching `where` (with ?1 bound to `value`), by id, at most `limit`.
absl::StatusOr<std::vector<SweepRecord>> ReadSweeps(Database& db, const std::string& where,
                                                    int64_t value, int limit);
absl::StatusOr<std::vector<TrialRecord>> ReadTrials(Database& db, const TrialQuery& query);
absl::StatusOr<std::map<std::string, MetricSummary>> ReadSummaries(Database& db, int64_t trial_id);

// Metric ingestion. Keeps the metric-name ids and which (trial, attempt, metric) already
// superseded older attempts; used from the writer thread only.
class MetricWriter {
 public:
  // Runs inside the writer's savepoint. The caches learn from a batch only when it succeeded;
  // a batch that fails is rolled back and leaves them as they were.
  absl::Status Append(Database& db, const EventBatchRecord& batch, int64_t* inserted);
  // Forgets everything cached: the transaction holding the last batches did not commit.
  void Forget();

 private:
  absl::Status AppendRows(Database& db, const EventBatchRecord& batch, int64_t* inserted);
  absl::StatusOr<int64_t> MetricId(Database& db, const std::string& name);
  absl::Status Supersede(Database& db, int64_t trial_id, int attempt, int64_t metric_id,
                         int64_t from_step);
  void Commit();

  std::unordered_map<std::string, int64_t> metric_ids_;
  std::set<std::tuple<int64_t, int, int64_t>> superseded_;
  std::vector<std::pair<std::string, int64_t>> pending_ids_;
  std::vector<std::tuple<int64_t, int, int64_t>> pending_superseded_;
};

}  // namespace spheret::store
