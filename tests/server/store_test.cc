#include "server/store/store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "common/sweep_expand.h"
#include "server/store/migrations.h"
#include "server/store/sqlite_db.h"

namespace spheret::store {
namespace {

class StoreTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("spheret_store_test_" + std::to_string(getpid()) + "_" +
            testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "spheret.db").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<Store> Open() {
    absl::StatusOr<std::unique_ptr<Store>> store = OpenSqliteStore({path_});
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }

  int64_t Query(const std::string& sql) {
    auto db = Database::Open(path_, /*read_only=*/true);
    EXPECT_TRUE(db.ok());
    return *(*db)->QueryInt(sql);
  }

  static std::vector<TrialSpec> Trials(int count, int offset = 0) {
    std::vector<TrialSpec> trials;
    for (int i = offset; i < offset + count; ++i) {
      trials.push_back({"{\"seed\":" + std::to_string(i) + "}", "key" + std::to_string(i)});
    }
    return trials;
  }

  static SweepRecord Sweep(const std::string& name) {
    SweepRecord sweep;
    sweep.name = name;
    sweep.spec_yaml = "name: " + name;
    return sweep;
  }

  std::filesystem::path dir_;
  std::string path_;
};

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

TEST_F(StoreTest, MetricWritesAreIdempotentAndResumedAttemptsSupersede) {
  std::unique_ptr<Store> store = Open();
  const int64_t trial = store->SubmitSweep(Sweep("a"), Trials(1), 1)->created[0].trial_id;
  EventBatchRecord batch{trial, 1, {}, {{7, "{\"type\":\"diag\"}"}}, 20, "/ckpt/20"};
  for (int step = 0; step < 30; ++step)
    batch.metrics.push_back({"train/loss", step, 10.0 - step, 0});
  EXPECT_EQ(*store->AppendEvents(batch), 30);
  EXPECT_EQ(*store->AppendEvents(batch), 0) << "a replay stores nothing twice";
  std::map<std::string, MetricSummary> summary = *store->Summaries(trial);
  EXPECT_EQ(summary["train/loss"].count, 30);
  EXPECT_EQ(summary["train/loss"].last_step, 29);
  EXPECT_DOUBLE_EQ(summary["train/loss"].min, -19.0);
  // Attempt 2 resumes from the checkpoint at step 20.
  EventBatchRecord resumed{trial, 2, {}, {}, 0, ""};
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
        EventBatchRecord batch{id, 1, {}, {}, 0, ""};
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
  ASSERT_TRUE(store->CreateToken("abc", "ci", "worker", 1).ok());
  EXPECT_EQ(**store->TokenRole("abc"), "worker");
  EXPECT_FALSE(store->TokenRole("nope")->has_value());
  EXPECT_FALSE(store->CreateToken("x", "bad", "root", 1).ok()) << "roles are checked";
}

}  // namespace
}  // namespace spheret::store
