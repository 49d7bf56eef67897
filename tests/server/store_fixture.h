// The fixture of the store's tests: a fresh SQLite file per test in a temporary folder, and
// helpers to submit trials and query the file directly.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "server/domain/records.h"
#include "server/store/sqlite_db.h"
#include "server/store/store.h"
#include "tests/server/layer_query.h"

namespace spheret::store {

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

}  // namespace spheret::store
