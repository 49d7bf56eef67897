// The database file's permissions (server/store/sqlite_db.h): it holds every result, config and
// token hash, so it and SQLite's -wal and -shm files are the coordinator's user's alone.
#include "server/store/sqlite_db.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "tests/server/store_fixture.h"

namespace spheret::store {
namespace {

mode_t ModeOf(const std::string& path) {
  struct stat info;
  EXPECT_EQ(stat(path.c_str(), &info), 0) << path;
  return info.st_mode & 07777;
}

// Issue 44, item 13: under the default umask 022 the database and its -wal and -shm files were
// created 0644, readable by every local user.
TEST_F(StoreTest, ANewDatabaseAndItsWalAreOwnerOnlyUnderTheDefaultUmask) {
  const mode_t old = umask(022);
  std::unique_ptr<Store> store = Open();
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(store->SubmitSweep(Sweep("s"), Trials(2), 1).ok());  // a write: the WAL grows
  umask(old);
  for (const std::string suffix : {"", "-wal", "-shm"}) {
    ASSERT_TRUE(std::filesystem::exists(path_ + suffix)) << suffix;
    EXPECT_EQ(ModeOf(path_ + suffix), 0600u) << "spheret.db" << suffix;
  }
}

// A file that exists keeps its mode (an administrator's choice); read-only opens create nothing.
TEST_F(StoreTest, AnExistingDatabaseKeepsItsModeAndAReadOnlyOpenCreatesNothing) {
  EXPECT_FALSE(Database::Open(path_, /*read_only=*/true).ok());
  EXPECT_FALSE(std::filesystem::exists(path_));
  ASSERT_TRUE(Database::Open(path_, /*read_only=*/false).ok());
  std::filesystem::permissions(path_, std::filesystem::perms(0640));
  ASSERT_TRUE(Database::Open(path_, /*read_only=*/false).ok());
  EXPECT_EQ(ModeOf(path_), 0640u);
}

}  // namespace
}  // namespace spheret::store
