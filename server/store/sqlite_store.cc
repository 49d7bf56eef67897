// The SQLite implementation of Store: one WriteQueue for every write, a pool of read-only
// connections for queries (WAL lets them read while the writer writes).
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "server/store/migrations.h"
#include "server/store/sqlite_rows.h"
#include "server/store/store.h"
#include "server/store/write_queue.h"

namespace spheret::store {
namespace {

using nlohmann::json;

// Read-only connections handed to one query at a time.
class ReadPool {
 public:
  absl::Status Open(const std::string& path, int count) {
    for (int i = 0; i < count; ++i) {
      SPHERET_ASSIGN_OR_RETURN(auto db, Database::Open(path, /*read_only=*/true));
      free_.push_back(std::move(db));
    }
    return absl::OkStatus();
  }
  // Runs `query` on a free connection.
  template <typename F>
  auto With(F query) {
    std::unique_ptr<Database> db;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      available_.wait(lock, [this] { return !free_.empty(); });
      db = std::move(free_.back());
      free_.pop_back();
    }
    auto result = query(*db);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      free_.push_back(std::move(db));
    }
    available_.notify_one();
    return result;
  }

 private:
  std::mutex mutex_;
  std::condition_variable available_;
  std::vector<std::unique_ptr<Database>> free_;
};

class SqliteStore : public Store {
 public:
  absl::Status Open(const StoreOptions& options) {
    options_ = options;
    SPHERET_ASSIGN_OR_RETURN(auto db, Database::Open(options.path, /*read_only=*/false));
    SPHERET_RETURN_IF_ERROR(db->Exec("PRAGMA journal_mode = WAL"));
    SPHERET_RETURN_IF_ERROR(db->Exec(options.synchronous_full ? "PRAGMA synchronous = FULL"
                                                              : "PRAGMA synchronous = NORMAL"));
    SPHERET_RETURN_IF_ERROR(db->Exec("PRAGMA foreign_keys = ON"));
    SPHERET_RETURN_IF_ERROR(db->Exec(
        absl::StrCat("PRAGMA cache_size = -", std::max(options.writer_cache_mib, 1) * 1024)));
    SPHERET_RETURN_IF_ERROR(Migrate(*db));
    writer_ = std::make_unique<WriteQueue>(std::move(db), options.max_batch_commands);
    return readers_.Open(options.path, std::max(options.read_connections, 1));
  }

  absl::StatusOr<SubmitOutcome> SubmitSweep(const SweepRecord& sweep,
                                            const std::vector<TrialSpec>& trials,
                                            int64_t now_ms) override {
    SubmitOutcome outcome;
    absl::Status status = writer_->Run(
        [&](Database& db) { return SubmitInTransaction(db, sweep, trials, now_ms, &outcome); });
    if (!status.ok()) return status;
    return outcome;
  }

  std::future<absl::Status> Apply(Changes changes, int64_t now_ms) override {
    return writer_->SubmitChained([changes = std::move(changes), now_ms](Database& db) {
      return WriteChanges(db, changes, now_ms);
    });
  }

  std::future<absl::Status> ResumeDecisions() override { return writer_->ResetChain(); }

  absl::StatusOr<int64_t> AppendEvents(const EventBatchRecord& batch) override {
    int64_t inserted = 0;
    absl::Status status =
        writer_->Run([&](Database& db) { return metrics_.Append(db, batch, &inserted); });
    if (!status.ok()) {
      // The transaction may not have committed: drop the writer's caches (on its thread).
      writer_->Submit([this](Database&) {
        metrics_.Forget();
        return absl::OkStatus();
      });
      return status;
    }
    std::lock_guard<std::mutex> lock(stats_mutex_);
    stats_.metric_rows += inserted;
    return inserted;
  }

  absl::Status SetLastAlive(int64_t now_ms) override {
    return writer_->Run([now_ms](Database& db) -> absl::Status {
      SPHERET_ASSIGN_OR_RETURN(
          auto statement,
          db.Prepare("INSERT INTO coordinator_state(key, value) VALUES ('last_alive_ms', ?1) "
                     "ON CONFLICT(key) DO UPDATE SET value = excluded.value"));
      return statement->Bind(1, now_ms).Run();
    });
  }

  absl::Status CreateToken(const std::string& token_hash, const std::string& name, Role role,
                           const std::string& worker_id, int64_t now_ms,
                           int64_t expires_ms) override {
    if ((role == Role::kWorker) == worker_id.empty()) {
      return absl::InvalidArgumentError(
          role == Role::kWorker ? "a worker token needs the worker id it speaks for (--worker-id)"
                                : "only worker tokens are bound to a worker id");
    }
    return writer_->Run([&](Database& db) -> absl::Status {
      SPHERET_ASSIGN_OR_RETURN(auto statement,
                               db.Prepare("INSERT INTO api_tokens(token_hash, name, role, "
                                          "created_ms, worker_id, expires_ms) VALUES (?1, ?2, "
                                          "?3, ?4, ?5, ?6)"));
      return statement->Bind(1, token_hash)
          .Bind(2, name)
          .Bind(3, RoleName(role))
          .Bind(4, now_ms)
          .Bind(5, worker_id)
          .Bind(6, expires_ms)
          .Run();
    });
  }

  absl::StatusOr<RestoredState> LoadState() override {
    return readers_.With([](Database& db) { return LoadStateFrom(db); });
  }

  absl::StatusOr<SweepRecord> GetSweep(int64_t sweep_id) override {
    return readers_.With([&](Database& db) -> absl::StatusOr<SweepRecord> {
      SPHERET_ASSIGN_OR_RETURN(auto sweeps, ReadSweeps(db, "WHERE sweep_id = ?1", sweep_id, 1));
      if (sweeps.empty()) return absl::NotFoundError(absl::StrCat("no sweep ", sweep_id));
      SPHERET_ASSIGN_OR_RETURN(sweeps.front().spec_yaml, ReadSweepSpec(db, sweep_id));
      return sweeps.front();
    });
  }

  absl::StatusOr<std::vector<SweepRecord>> ListSweeps(int64_t after, int limit) override {
    return readers_.With(
        [&](Database& db) { return ReadSweeps(db, "WHERE sweep_id > ?1", after, limit); });
  }

  absl::StatusOr<std::map<std::string, int64_t>> CountTrials(int64_t sweep_id) override {
    return CountByState("trials", "?1 = 0 OR sweep_id = ?1", sweep_id);
  }

  absl::StatusOr<std::map<std::string, int64_t>> CountEvalJobs() override {
    // Through the partial index of the jobs: for its GROUP BY the planner would otherwise walk
    // trials_by_state and read every trial's row, each housekeeping pass (with 2,000 workers
    // acquiring from 20,000 trials, as many CPU samples as Acquire itself).
    return CountByState("trials INDEXED BY trials_by_eval_of", "eval_of > 0 AND ?1 = 0", 0);
  }

  absl::StatusOr<std::map<std::string, int64_t>> CountByState(const std::string& from,
                                                              const std::string& where,
                                                              int64_t sweep_id) {
    return readers_.With([&](Database& db) -> absl::StatusOr<std::map<std::string, int64_t>> {
      SPHERET_ASSIGN_OR_RETURN(auto statement, db.Prepare("SELECT state, count(*) FROM " + from +
                                                          " WHERE " + where + " GROUP BY state"));
      statement->Bind(1, sweep_id);
      std::map<std::string, int64_t> counts;
      for (;;) {
        SPHERET_ASSIGN_OR_RETURN(auto row, statement->Step());
        if (!row) break;
        counts[statement->Text(0)] = statement->Int(1);
      }
      statement->Reset();
      return counts;
    });
  }

  absl::StatusOr<std::vector<TrialRecord>> ListTrials(const TrialQuery& query) override {
    return readers_.With([&](Database& db) { return ReadTrials(db, query); });
  }

  absl::StatusOr<std::optional<TrialRecord>> GetTrial(int64_t trial_id) override {
    return readers_.With([&](Database& db) -> absl::StatusOr<std::optional<TrialRecord>> {
      TrialQuery query;
      query.after_trial_id = trial_id - 1;
      query.limit = 1;
      SPHERET_ASSIGN_OR_RETURN(auto trials, ReadTrials(db, query));
      if (trials.empty() || trials.front().trial_id != trial_id) return std::nullopt;
      return trials.front();
    });
  }

  absl::StatusOr<std::map<std::string, MetricSummary>> Summaries(int64_t trial_id) override {
    return readers_.With([&](Database& db) { return ReadSummaries(db, trial_id); });
  }

  absl::StatusOr<std::vector<AttemptRecord>> Attempts(int64_t trial_id) override {
    return readers_.With([&](Database& db) { return ReadAttempts(db, trial_id); });
  }

  absl::StatusOr<EventPage> Events(int64_t trial_id, const EventPageQuery& query) override {
    return readers_.With([&](Database& db) { return ReadEvents(db, trial_id, query); });
  }

  absl::StatusOr<std::vector<EvalRecord>> Evals(int64_t trial_id) override {
    return readers_.With([&](Database& db) { return ReadEvals(db, trial_id); });
  }

  absl::StatusOr<std::vector<RungValue>> RungValues(int64_t sweep_id) override {
    return readers_.With([&](Database& db) { return ReadRungValues(db, sweep_id); });
  }

  absl::StatusOr<int64_t> LatestCheckpointStep(int64_t trial_id) override {
    return readers_.With([&](Database& db) {
      return db.QueryInt(absl::StrCat(
          "SELECT coalesce(max(step), 0) FROM checkpoints WHERE trial_id = ", trial_id));
    });
  }

  absl::StatusOr<CurveRecord> Curve(int64_t trial_id, const std::string& metric) override {
    return readers_.With([&](Database& db) { return ReadCurve(db, trial_id, metric); });
  }

  absl::StatusOr<std::vector<LayerSeries>> LayerValues(int64_t trial_id,
                                                       const LayerValueQuery& query) override {
    return readers_.With([&](Database& db) { return ReadLayerValues(db, trial_id, query); });
  }

  absl::StatusOr<std::vector<TokenRecord>> ListTokens(int64_t after, int limit) override {
    return readers_.With([&](Database& db) { return ReadTokens(db, after, limit); });
  }

  absl::StatusOr<int64_t> RevokeToken(const std::string& name) override {
    int64_t deleted = 0;
    SPHERET_RETURN_IF_ERROR(writer_->Run([&](Database& db) -> absl::Status {
      SPHERET_ASSIGN_OR_RETURN(auto statement,
                               db.Prepare("DELETE FROM api_tokens WHERE name = ?1"));
      SPHERET_RETURN_IF_ERROR(statement->Bind(1, name).Run());
      deleted = db.Changes();
      return absl::OkStatus();
    }));
    return deleted;
  }

  absl::StatusOr<std::optional<TokenIdentity>> FindToken(const std::string& token_hash) override {
    return readers_.With([&](Database& db) -> absl::StatusOr<std::optional<TokenIdentity>> {
      SPHERET_ASSIGN_OR_RETURN(
          auto statement,
          db.Prepare("SELECT role, worker_id, expires_ms FROM api_tokens WHERE token_hash = ?1"));
      statement->Bind(1, token_hash);
      SPHERET_ASSIGN_OR_RETURN(auto row, statement->Step());
      std::optional<TokenIdentity> identity;
      // The schema's CHECK admits only known roles; anything else is no identity.
      absl::StatusOr<Role> role = ParseRole(row ? statement->Text(0) : "");
      if (row && role.ok()) identity = TokenIdentity{*role, statement->Text(1), statement->Int(2)};
      statement->Reset();
      return identity;
    });
  }

  StoreStats Stats() const override {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    StoreStats stats = stats_;
    stats.commits = writer_->commits();
    return stats;
  }

  void OnCommit(std::function<void(double)> callback) override {
    writer_->OnCommit(std::move(callback));
  }

 private:
  StoreOptions options_;
  std::unique_ptr<WriteQueue> writer_;
  ReadPool readers_;
  MetricWriter metrics_;  // used on the writer thread only
  mutable std::mutex stats_mutex_;
  StoreStats stats_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> OpenSqliteStore(const StoreOptions& options) {
  // SQLite's allocation statistics, which nothing here reads, take a global mutex on every
  // allocation. Only before SQLite's first use in the process; afterwards it is refused
  // (SQLITE_MISUSE) and changes nothing.
  static std::once_flag memstatus;
  std::call_once(memstatus, [] { sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0); });
  auto store = std::make_unique<SqliteStore>();
  if (absl::Status status = store->Open(options); !status.ok()) {
    return absl::Status(status.code(),
                        absl::StrCat("database '", options.path, "': ", status.message()));
  }
  return std::unique_ptr<Store>(std::move(store));
}

absl::StatusOr<std::vector<TrialRecord>> AllTrials(StateStore& store, int64_t sweep_id) {
  std::vector<TrialRecord> all;
  TrialQuery page{sweep_id, {}, 0, 1000};
  while (true) {
    SPHERET_ASSIGN_OR_RETURN(std::vector<TrialRecord> trials, store.ListTrials(page));
    if (trials.empty()) return all;
    page.after_trial_id = trials.back().trial_id;
    all.insert(all.end(), trials.begin(), trials.end());
  }
}

}  // namespace spheret::store
