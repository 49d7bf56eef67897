#include "server/store/store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "server/domain/records.h"
#include "server/store/migrations.h"
#include "server/store/sqlite_db.h"
#include "server/store/write_queue.h"
#include "tests/server/store_fixture.h"

namespace spheret::store {
namespace {

TEST_F(StoreTest, CreatesTheSchemaInWalModeWithStrictTables) {
  ASSERT_NE(Open(), nullptr);
  EXPECT_EQ(Query("PRAGMA user_version"), static_cast<int64_t>(Migrations().size()));
  auto db = *Database::Open(path_, true);
  Statement* mode = *db->Prepare("PRAGMA journal_mode");
  ASSERT_TRUE(*mode->Step());
  EXPECT_EQ(mode->Text(0), "wal");
  mode->Reset();
  EXPECT_EQ(Query("SELECT count(*) FROM pragma_table_list WHERE strict = 1 AND schema = 'main'"),
            Query("SELECT count(*) FROM sqlite_schema WHERE type = 'table'"))
      << "every table is STRICT";
  EXPECT_EQ(Query("SELECT count(*) FROM pragma_integrity_check WHERE integrity_check = 'ok'"), 1);
}

TEST_F(StoreTest, MigratesFromEveryEarlierVersion) {
  const int latest = static_cast<int>(Migrations().size());
  for (int version = 0; version < latest; ++version) {
    std::filesystem::remove(path_);
    {
      auto db = *Database::Open(path_, false);
      ASSERT_TRUE(Migrate(*db, version).ok());
      EXPECT_EQ(*db->QueryInt("PRAGMA user_version"), version);
    }
    ASSERT_NE(Open(), nullptr) << "from version " << version;
    EXPECT_EQ(Query("PRAGMA user_version"), latest);
    EXPECT_EQ(Query("SELECT count(*) FROM sqlite_schema WHERE name = 'scalars'"), 1);
  }
}

TEST_F(StoreTest, MigrationsKeepTheRowsOfEarlierVersions) {
  {
    auto db = *Database::Open(path_, false);
    ASSERT_TRUE(Migrate(*db, 1).ok());
    ASSERT_TRUE(db->Exec("INSERT INTO events(trial_id, attempt, json) VALUES (1, 1, '{}'), "
                         "(1, 1, '{}')")
                    .ok());
  }
  ASSERT_NE(Open(), nullptr);
  EXPECT_EQ(Query("SELECT count(*) FROM events"), 2);
  EXPECT_EQ(Query("SELECT count(DISTINCT seq) FROM events WHERE seq < 0"), 2);
}

TEST_F(StoreTest, RefusesADatabaseFromANewerSpheret) {
  ASSERT_NE(Open(), nullptr);
  {
    auto db = *Database::Open(path_, false);
    ASSERT_TRUE(db->Exec("PRAGMA user_version = 999").ok());
  }
  absl::StatusOr<std::unique_ptr<Store>> store = OpenSqliteStore({path_});
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(store.status().message().find("newer spheret"), absl::string_view::npos)
      << store.status();
  EXPECT_EQ(Query("PRAGMA user_version"), 999) << "the file is left alone";
}

TEST_F(StoreTest, RefusesAFileThatIsNotADatabase) {
  {
    std::ofstream garbage(path_, std::ios::binary);
    for (int i = 0; i < 4096; ++i) garbage.put(static_cast<char>((i * 7919) % 251));
  }
  absl::StatusOr<std::unique_ptr<Store>> store = OpenSqliteStore({path_});
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kDataLoss) << store.status();
  EXPECT_NE(store.status().message().find(path_), absl::string_view::npos) << store.status();
  EXPECT_NE(store.status().message().find("not a database"), absl::string_view::npos);
}

TEST_F(StoreTest, ResubmittingCreatesNoTrialsAndExtendingAddsOnlyNewOnes) {
  std::unique_ptr<Store> store = Open();
  absl::StatusOr<SubmitOutcome> first = store->SubmitSweep(Sweep("a"), Trials(4), 1);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->created.size(), 4u);
  absl::StatusOr<SubmitOutcome> again = store->SubmitSweep(Sweep("a"), Trials(4), 2);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->sweep.sweep_id, first->sweep.sweep_id);
  EXPECT_TRUE(again->created.empty());
  absl::StatusOr<SubmitOutcome> more = store->SubmitSweep(Sweep("a"), Trials(6), 3);
  EXPECT_EQ(more->created.size(), 2u);
  EXPECT_EQ(more->trial_count, 6);
  EXPECT_EQ(Query("SELECT count(*) FROM trials"), 6);
  // The same idempotency key under another name returns the first sweep.
  SweepRecord keyed = Sweep("b");
  keyed.idempotency_key = "k1";
  const int64_t b = store->SubmitSweep(keyed, Trials(1), 4)->sweep.sweep_id;
  keyed.name = "c";
  EXPECT_EQ(store->SubmitSweep(keyed, Trials(1), 5)->sweep.sweep_id, b);
}

// Issue 11, item 11: a different file under an existing sweep name merged its trials into the old
// sweep with the old resources (a gpus: 1 sweep ran device=cuda trials on CPU workers). A file
// under an existing name may add trials to the grid; other settings changed are refused.
TEST_F(StoreTest, SweepNamesAnotherFileWithOtherSettingsUnderAnExistingNameIsRefused) {
  std::unique_ptr<Store> store = Open();
  ASSERT_TRUE(store->SubmitSweep(Sweep("a"), Trials(2), 1).ok());
  SweepRecord on_gpus = Sweep("a");
  on_gpus.gpus = 1;
  on_gpus.priority = 70;
  absl::StatusOr<SubmitOutcome> refused = store->SubmitSweep(on_gpus, Trials(2, 10), 2);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(refused.status().message(),
            "sweep 'a' (sweep 1) exists with other settings (resources.gpus 0 -> 1, priority 50 "
            "-> 70); a file under an existing name may only add trials to its grid: give it "
            "another name to submit it as a new sweep");
  EXPECT_EQ(Query("SELECT count(*) FROM trials"), 2) << "nothing merged";
  EXPECT_EQ(Query("SELECT count(*) FROM sweeps"), 1);
  on_gpus.name = "a-gpu";
  absl::StatusOr<SubmitOutcome> renamed = store->SubmitSweep(on_gpus, Trials(2, 10), 3);
  ASSERT_TRUE(renamed.ok()) << renamed.status();
  EXPECT_EQ(renamed->sweep.sweep_id, 2);
  EXPECT_EQ(Query("SELECT gpus FROM sweeps WHERE sweep_id = 2"), 1);
}

TEST_F(StoreTest, MetricWritesAreIdempotentAndResumedAttemptsSupersede) {
  std::unique_ptr<Store> store = Open();
  const int64_t trial = store->SubmitSweep(Sweep("a"), Trials(1), 1)->created[0].trial_id;
  EventBatchRecord batch{trial, 1, {}, {{7, "{\"type\":\"diag\"}"}}, 20, "/ckpt/20", {}, {}};
  for (int step = 0; step < 30; ++step)
    batch.metrics.push_back({"train/loss", step, 10.0 - step, 0});
  EXPECT_EQ(*store->AppendEvents(batch), 30);
  EXPECT_EQ(*store->AppendEvents(batch), 0) << "a replay stores nothing twice";
  std::map<std::string, MetricSummary> summary = *store->Summaries(trial);
  EXPECT_EQ(summary["train/loss"].count, 30);
  EXPECT_EQ(summary["train/loss"].last_step, 29);
  EXPECT_DOUBLE_EQ(summary["train/loss"].min, -19.0);
  // Attempt 2 resumes from the checkpoint at step 20.
  EventBatchRecord resumed{trial, 2, {}, {}, 0, "", {}, {}};
  for (int step = 20; step < 40; ++step) resumed.metrics.push_back({"train/loss", step, 1.0, 0});
  EXPECT_EQ(*store->AppendEvents(resumed), 20);
  EXPECT_EQ(Query("SELECT count(*) FROM scalars WHERE superseded = 1"), 10);
  EXPECT_EQ(Query("SELECT count(*) FROM curves"), 40);
  EXPECT_EQ(Query("SELECT count(DISTINCT step) FROM curves"), 40) << "one value per step";
  EXPECT_EQ(Query("SELECT count(*) FROM events"), 1)
      << "the replayed event (same seq) is stored once";
  EXPECT_EQ(Query("SELECT step FROM checkpoints"), 20);
}

TEST_F(StoreTest, DecisionsAndWorkersSurviveReopening) {
  int64_t trial_id = 0;
  {
    std::unique_ptr<Store> store = Open();
    trial_id = store->SubmitSweep(Sweep("a"), Trials(2), 1)->created[0].trial_id;
    Changes changes;
    TrialRecord trial;
    trial.trial_id = trial_id;
    trial.sweep_id = 1;
    trial.state = TrialState::kRunning;
    trial.attempt = 1;
    changes.trials.push_back(trial);
    changes.leases_put.push_back({trial_id, 1, "w", 0, {0, 1}, 12345, true, {"h", 29500, 1, 2}});
    changes.attempts_started.push_back({trial_id, 1, "w", 10});
    WorkerRecord worker;
    worker.worker_id = "w";
    worker.cpu_slots = 2;
    worker.last_seen_ms = 99;
    changes.workers.push_back(worker);
    ASSERT_TRUE(store->Apply(changes, 100).get().ok());
    ASSERT_TRUE(store->SetLastAlive(777).ok());
  }
  std::unique_ptr<Store> store = Open();
  RestoredState state = *store->LoadState();
  EXPECT_EQ(state.last_alive_ms, 777);
  ASSERT_EQ(state.live_trials.size(), 2u);
  EXPECT_EQ(state.live_trials[0].state, TrialState::kRunning);
  ASSERT_EQ(state.leases.size(), 1u);
  EXPECT_EQ(state.leases[0].slots, (std::vector<int>{0, 1}));
  EXPECT_EQ(state.leases[0].rendezvous.master_port, 29500);
  ASSERT_EQ(state.workers.size(), 1u);
  EXPECT_EQ(state.workers[0].cpu_slots, 2);
}

TEST_F(StoreTest, ConcurrentWritersLoseNothing) {
  std::unique_ptr<Store> store = Open();
  std::vector<TrialRecord> trials = store->SubmitSweep(Sweep("a"), Trials(8), 1)->created;
  std::vector<std::thread> threads;
  for (const TrialRecord& trial : trials) {
    threads.emplace_back([&store, id = trial.trial_id] {
      for (int step = 0; step < 200; step += 10) {
        EventBatchRecord batch{id, 1, {}, {}, 0, "", {}, {}};
        for (int s = step; s < step + 10; ++s) batch.metrics.push_back({"lr", s, 0.1, 0});
        ASSERT_TRUE(store->AppendEvents(batch).ok());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(Query("SELECT count(*) FROM scalars"), 8 * 200);
  EXPECT_EQ(Query("SELECT sum(count) FROM summaries"), 8 * 200);
}

TEST_F(StoreTest, TokensAreStoredByHashWithARole) {
  std::unique_ptr<Store> store = Open();
  ASSERT_TRUE(store->CreateToken("abc", "ci", Role::kWorker, "gpu-1", 1).ok());
  EXPECT_EQ((*store->FindToken("abc"))->role, Role::kWorker);
  EXPECT_EQ((*store->FindToken("abc"))->worker_id, "gpu-1");
  EXPECT_FALSE(store->FindToken("nope")->has_value());
  EXPECT_FALSE(ParseRole("root").ok()) << "roles are checked";
  EXPECT_EQ(store->CreateToken("y", "unbound", Role::kWorker, "", 1).code(),
            absl::StatusCode::kInvalidArgument)
      << "a worker token speaks for one worker";
  EXPECT_EQ(store->CreateToken("z", "reader", Role::kRead, "gpu-1", 1).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(store->CreateToken("exp", "daily", Role::kRead, "", 1, 86'400'001).ok());
  EXPECT_EQ((*store->FindToken("exp"))->expires_ms, 86'400'001);
  EXPECT_EQ((*store->FindToken("abc"))->expires_ms, 0) << "no expiry given: never";
  EXPECT_EQ(store->ListTokens()->back().expires_ms, 86'400'001);
}

// Issue 28, item 6: lists and the scheduler's state read every sweep's file (3.9 MB each).
TEST_F(StoreTest, OnlyGetSweepReadsTheSweepFile) {
  std::unique_ptr<Store> store = Open();
  absl::StatusOr<SubmitOutcome> submitted = store->SubmitSweep(Sweep("a"), Trials(1), 1);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  EXPECT_EQ(submitted->sweep.spec_yaml, "");
  EXPECT_EQ(store->GetSweep(submitted->sweep.sweep_id)->spec_yaml, "name: a");
  EXPECT_EQ(store->ListSweeps(0, 10)->front().spec_yaml, "");
  EXPECT_EQ(store->LoadState()->sweeps.front().spec_yaml, "");
}

// Issue 11, item 7: when SQLite rolls a group commit back by itself (a full disk: here the
// database's page cap), no command of the batch is reported done, and none of the commands after
// the failing one runs outside the transaction (before, they ran in autocommit mode, were stored,
// and were reported failed).
TEST_F(StoreTest, DecisionsBeforeCommitsARolledBackBatchReportsEveryCommandFailed) {
  auto opened = Database::Open(path_, /*read_only=*/false);
  ASSERT_TRUE(opened.ok()) << opened.status();
  std::unique_ptr<Database> db = std::move(*opened);
  ASSERT_TRUE(db->Exec("PRAGMA journal_mode = WAL").ok());
  ASSERT_TRUE(db->Exec("CREATE TABLE t(x BLOB)").ok());
  const int64_t pages = *db->QueryInt("PRAGMA page_count");
  ASSERT_TRUE(db->Exec("PRAGMA max_page_count = " + std::to_string(pages + 2)).ok());
  WriteQueue queue(std::move(db), 64);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  // The first command holds the writer so that the next three are grouped into one batch.
  std::promise<void> started;
  std::future<absl::Status> hold = queue.Submit([&started, released](Database&) {
    started.set_value();
    released.wait();
    return absl::OkStatus();
  });
  started.get_future().wait();  // the writer runs `hold` alone; what comes next queues up
  const auto insert = [](std::string bytes) {
    return [bytes](Database& db) -> absl::Status {
      return db.Exec("INSERT INTO t VALUES (x'" + bytes + "')");
    };
  };
  std::future<absl::Status> before = queue.Submit(insert("01"));
  std::future<absl::Status> full = queue.Submit(insert(std::string(400'000, 'a')));  // 200 KB
  std::future<absl::Status> after = queue.Submit(insert("02"));
  release.set_value();
  EXPECT_TRUE(hold.get().ok());
  const absl::Status before_status = before.get(), full_status = full.get();
  const absl::Status after_status = after.get();
  EXPECT_FALSE(before_status.ok()) << "its transaction never committed";
  EXPECT_FALSE(full_status.ok());
  EXPECT_FALSE(after_status.ok()) << "it never ran";
  EXPECT_EQ(Query("SELECT count(*) FROM t"), 0) << "nothing of the batch is on disk";
  // The queue goes on: the next command commits alone.
  EXPECT_TRUE(queue.Run(insert("03")).ok());
  EXPECT_EQ(Query("SELECT count(*) FROM t"), 1);
}

// Issue 11, item 7: decisions are a chain. Once one fails, no later one is written (it would build
// on a decision the database lacks) until the chain is reset; other writes go on.
TEST_F(StoreTest, DecisionsBeforeCommitsNoDecisionIsWrittenAfterAFailedOne) {
  auto opened = Database::Open(path_, /*read_only=*/false);
  ASSERT_TRUE(opened.ok()) << opened.status();
  ASSERT_TRUE((*opened)->Exec("CREATE TABLE t(x INTEGER)").ok());
  WriteQueue queue(std::move(*opened), 64);
  const auto insert = [](int x) {
    return
        [x](Database& db) { return db.Exec("INSERT INTO t VALUES (" + std::to_string(x) + ")"); };
  };
  EXPECT_TRUE(queue.SubmitChained(insert(1)).get().ok());
  std::future<absl::Status> failed = queue.SubmitChained(
      [](Database& db) { return db.Exec("INSERT INTO no_such_table VALUES (1)"); });
  std::future<absl::Status> after = queue.SubmitChained(insert(2));
  std::future<absl::Status> plain = queue.Submit(insert(3));
  EXPECT_FALSE(failed.get().ok());
  const absl::Status after_status = after.get();
  EXPECT_EQ(after_status.code(), absl::StatusCode::kUnavailable) << after_status;
  EXPECT_TRUE(plain.get().ok()) << "writes outside the chain go on";
  EXPECT_TRUE(queue.ResetChain().get().ok());
  EXPECT_TRUE(queue.SubmitChained(insert(4)).get().ok());
  EXPECT_EQ(Query("SELECT count(*) FROM t WHERE x IN (1, 3, 4)"), 3);
  EXPECT_EQ(Query("SELECT count(*) FROM t WHERE x = 2"), 0);
}

}  // namespace
}  // namespace spheret::store
