// Files replaced whole through a temporary (base/replacing_file.h): links planted at the
// temporary's name or the destination are refused and their targets left untouched.
#include "base/replacing_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace spheret {
namespace {

namespace fs = std::filesystem;

class ReplacingFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("replacing_file_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static std::string Read(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  absl::Status Write(const fs::path& path, const std::string& text) {
    absl::StatusOr<ReplacingFile> file = ReplacingFile::Create(path.string());
    if (!file.ok()) return file.status();
    if (absl::Status appended = file->Append(text); !appended.ok()) return appended;
    return file->Commit();
  }
  fs::path dir_;
};

TEST_F(ReplacingFileTest, WritesReplacesAndCleansUpAStaleTemporary) {
  const fs::path path = dir_ / "config.json";
  ASSERT_TRUE(Write(path, "one").ok());
  std::ofstream(dir_ / "config.json.tmp") << "a crashed write";
  ASSERT_TRUE(Write(path, "two").ok());
  EXPECT_EQ(Read(path), "two");
  EXPECT_FALSE(fs::exists(dir_ / "config.json.tmp"));
  {
    absl::StatusOr<ReplacingFile> abandoned = ReplacingFile::Create(path.string());
    ASSERT_TRUE(abandoned.ok());
    ASSERT_TRUE(abandoned->Append("never committed").ok());
  }
  EXPECT_EQ(Read(path), "two");  // the earlier file stays whole
  EXPECT_FALSE(fs::exists(dir_ / "config.json.tmp"));
}

TEST_F(ReplacingFileTest, HostileInputLinksAtEitherNameAreRefusedAndTheirTargetsUntouched) {
  const fs::path target = dir_ / "precious";
  std::ofstream(target) << "precious";
  for (const char* planted : {"model.safetensors.tmp", "model.safetensors"}) {
    fs::remove(dir_ / "model.safetensors.tmp");
    fs::remove(dir_ / "model.safetensors");
    fs::create_symlink(target, dir_ / planted);
    const absl::Status status = Write(dir_ / "model.safetensors", "weights");
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << planted;
    EXPECT_NE(status.message().find((dir_ / planted).string() + ": it is a symbolic link"),
              std::string::npos)
        << status;
    EXPECT_EQ(Read(target), "precious") << planted;
    EXPECT_TRUE(fs::is_symlink(dir_ / planted)) << "the link is left alone";
  }
  fs::remove(dir_ / "model.safetensors");
  fs::create_directory(dir_ / "model.safetensors.tmp");
  EXPECT_NE(Write(dir_ / "model.safetensors", "w").message().find("not a regular file"),
            std::string::npos);
}

TEST_F(ReplacingFileTest, TheModeIsTheOneAskedLessTheUmask) {
  const mode_t old = umask(022);
  absl::StatusOr<ReplacingFile> file = ReplacingFile::Create((dir_ / "a").string(), 0600);
  ASSERT_TRUE(file.ok());
  ASSERT_TRUE(file->Commit().ok());
  ASSERT_TRUE(Write(dir_ / "b", "").ok());
  umask(old);
  struct stat a, b;
  ASSERT_EQ(stat((dir_ / "a").c_str(), &a), 0);
  ASSERT_EQ(stat((dir_ / "b").c_str(), &b), 0);
  EXPECT_EQ(a.st_mode & 0777, 0600u);
  EXPECT_EQ(b.st_mode & 0777, 0644u);
}

}  // namespace
}  // namespace spheret
