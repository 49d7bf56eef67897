// The spool file's permissions (worker/daemon/spool_file.h): it holds the trials' configs and
// metrics, so it is the worker's user's alone whatever the umask.
#include "worker/daemon/spool_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace spheret::worker {
namespace {

namespace fs = std::filesystem;

mode_t ModeOf(const fs::path& path) {
  struct stat info;
  EXPECT_EQ(stat(path.c_str(), &info), 0) << path;
  return info.st_mode & 07777;
}

// Issue 44, item 13: under the default umask 022 the spool was created 0644 (readable by every
// local user), also when a stale temporary of that mode was left by a crash.
TEST(SpoolFileModeTest, ASpoolIsCreatedOwnerOnlyUnderTheDefaultUmask) {
  const fs::path dir =
      fs::temp_directory_path() / ("spheret_spool_mode_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const mode_t old = umask(022);
  {
    SpoolFile spool((dir / "spool.bin").string());
    std::vector<SpoolItem> items;
    std::string error;
    ASSERT_TRUE(spool.Open(&items, &error).ok());
    SpoolItem item;
    item.batch.set_trial_id(1);
    item.batch.set_attempt(1);
    ASSERT_TRUE(spool.Append(item).ok());
    EXPECT_EQ(ModeOf(dir / "spool.bin"), 0600u);
  }
  std::ofstream(dir / "spool.bin.tmp") << "a crashed rewrite";
  fs::permissions(dir / "spool.bin.tmp", fs::perms(0644));
  {
    SpoolFile spool((dir / "spool.bin").string());
    std::vector<SpoolItem> items;
    std::string error;
    ASSERT_TRUE(spool.Open(&items, &error).ok());
    EXPECT_EQ(items.size(), 1u);
    EXPECT_EQ(ModeOf(dir / "spool.bin"), 0600u);
  }
  umask(old);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace spheret::worker
