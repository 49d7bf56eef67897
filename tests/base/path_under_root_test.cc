// Paths kept under a root (base/path_under_root.h): ".." and absolute paths that leave it are
// refused naming the path and the root; paths inside it, however written, pass.
#include "base/path_under_root.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

namespace spheret {
namespace {

namespace fs = std::filesystem;

TEST(PathUnderRootTest, PathsInsideTheRootPassHoweverWritten) {
  for (const std::string path :
       {"/srv/data/zs", "/srv/data", "/srv/data/a/../zs/", "zs", "./zs/", "a/../zs", ""}) {
    EXPECT_TRUE(ResolveUnderRoot("--data", path, "--data-root", "/srv/data/").ok()) << path;
  }
  EXPECT_TRUE(ResolveUnderRoot("--data", "zs", "--data-root", "data").ok());
}

TEST(PathUnderRootTest, HostileInputPathsThatLeaveTheRootAreRefusedNamingBoth) {
  for (const std::string path :
       {"/srv/data/../../../../etc", "/etc", "/srv/database", "/srv/data/zs/../../etc", "/srv", "/",
        "..", "../data2", "zs/../../etc"}) {
    const absl::Status status =
        ResolveUnderRoot("--data", path, "--data-root", "/srv/data").status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << path;
    EXPECT_NE(status.message().find("--data " + path + " is outside --data-root /srv/data"),
              std::string::npos)
        << status;
  }
  const absl::Status relative =
      ResolveUnderRoot("--data", "../../etc", "--data-root", "data").status();
  EXPECT_NE(relative.message().find("is outside --data-root data"), std::string::npos) << relative;
}

// A folder named relative to the current folder counts only when it is inside the root; else the
// name is taken under the root, and a name that leaves it is refused as given.
TEST(PathUnderRootTest, ResolveTakesNamesUnderTheRootAndRefusesWhatLeavesIt) {
  const fs::path dir = fs::temp_directory_path() / ("path_under_root_" + std::to_string(getpid()));
  fs::create_directories(dir / "root" / "zs");
  fs::create_directories(dir / "zs");
  const std::string root = (dir / "root").string();
  EXPECT_EQ(ResolveUnderRoot("eval_data", "zs", "--data-root", root).value_or(""),
            (dir / "root" / "zs").string());
  EXPECT_EQ(ResolveUnderRoot("eval_data", (dir / "root" / "zs").string(), "--data-root", root)
                .value_or(""),
            (dir / "root" / "zs").string());
  const fs::path cwd = fs::current_path();
  fs::current_path(dir);  // ./zs is a folder, but outside the root: root/zs is meant
  EXPECT_EQ(ResolveUnderRoot("eval_data", "zs", "--data-root", root).value_or(""),
            (dir / "root" / "zs").string());
  for (const std::string& path :
       std::vector<std::string>{"../zs", (dir / "zs").string(), "/etc", "../../../../etc"}) {
    const absl::StatusOr<std::string> resolved =
        ResolveUnderRoot("eval_data", path, "--data-root", root);
    EXPECT_EQ(resolved.status().code(), absl::StatusCode::kInvalidArgument) << path;
    EXPECT_NE(resolved.status().message().find("eval_data " + path + " is outside --data-root " +
                                               root + " (it leads to "),
              std::string::npos)
        << resolved.status();
  }
  fs::current_path(cwd);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace spheret
