// The worker's folders on a hostile disk: symbolic links planted in the work dir or the
// checkpoint root are refused (the file they point to stays as it was), a work dir others may
// write is refused at start-up, and a trainer's stderr reaches its log and tail escaped.
#include "worker/daemon/launch.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "worker/daemon/trainer_process.h"
#include "worker/daemon/worker_options.h"

namespace spheret::worker {
namespace {

namespace fs = std::filesystem;

std::string Read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

v1::Lease Lease(int64_t trial, int attempt) {
  v1::Lease lease;
  lease.set_trial_id(trial);
  lease.set_attempt(attempt);
  lease.set_config_json(R"({"max_iters": 10})");
  return lease;
}

class LaunchTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        fs::temp_directory_path() / ("spheret_launch_test_" + std::to_string(getpid()) + "_" +
                                     testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "work");
    fs::create_directories(dir_ / "runs");
    fs::create_directories(dir_ / "elsewhere");
    outside_ = dir_ / "elsewhere" / "precious.txt";
    std::ofstream(outside_) << "precious\n";
  }
  void TearDown() override { fs::remove_all(dir_); }

  absl::StatusOr<RunFolder> Prepare(const v1::Lease& lease) {
    return PrepareRunFolder((dir_ / "work").string(), (dir_ / "runs").string(), lease);
  }

  fs::path dir_;
  fs::path outside_;  // a file a planted link points to
};

TEST_F(LaunchTest, ARunFolderIsPrivate) {
  absl::StatusOr<RunFolder> folder = Prepare(Lease(7, 1));
  ASSERT_TRUE(folder.ok()) << folder.status();
  EXPECT_EQ(Read(folder->config_path), "{\"max_iters\": 10}\n");
  for (const std::string& path : {folder->log_dir, folder->run_dir}) {
    EXPECT_EQ(fs::status(path).permissions() & fs::perms::all, fs::perms::owner_all) << path;
  }
  EXPECT_FALSE(folder->resume);
}

TEST_F(LaunchTest, APlantedConfigLinkIsRefusedAndItsTargetUntouched) {
  fs::create_directories(dir_ / "work/trials/trial-7-attempt-1");
  fs::create_symlink(outside_, dir_ / "work/trials/trial-7-attempt-1/config.json");
  absl::StatusOr<RunFolder> folder = Prepare(Lease(7, 1));
  EXPECT_EQ(folder.status().code(), absl::StatusCode::kFailedPrecondition) << folder.status();
  EXPECT_NE(folder.status().message().find("trial-7-attempt-1/config.json: it is a symbolic link"),
            std::string::npos)
      << folder.status();
  EXPECT_EQ(Read(outside_), "precious\n");
}

TEST_F(LaunchTest, APlantedFolderLinkIsRefused) {
  fs::create_directories(dir_ / "work/trials");
  fs::create_directory_symlink(dir_ / "elsewhere", dir_ / "work/trials/trial-7-attempt-1");
  absl::StatusOr<RunFolder> folder = Prepare(Lease(7, 1));
  EXPECT_EQ(folder.status().code(), absl::StatusCode::kFailedPrecondition) << folder.status();
  EXPECT_NE(folder.status().message().find("trial-7-attempt-1: not a folder but a symbolic link"),
            std::string::npos)
      << folder.status();
  EXPECT_FALSE(fs::exists(dir_ / "elsewhere/config.json"));
  // The same in the checkpoint root.
  fs::create_directory_symlink(dir_ / "elsewhere", dir_ / "runs/trial-8");
  EXPECT_EQ(Prepare(Lease(8, 1)).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(fs::exists(dir_ / "elsewhere/attempt-1"));
}

TEST_F(LaunchTest, ATakeOverRefusesLinksAndLinksTheCheckpoint) {
  fs::create_directories(dir_ / "runs/trial-9/attempt-1");
  std::ofstream(dir_ / "runs/trial-9/attempt-1/ckpt.pt") << "weights";
  std::ofstream(dir_ / "runs/trial-9/attempt-1/events.jsonl") << "{}\n";
  absl::StatusOr<RunFolder> folder = Prepare(Lease(9, 2));
  ASSERT_TRUE(folder.ok()) << folder.status();
  EXPECT_TRUE(folder->resume);
  EXPECT_EQ(fs::hard_link_count(fs::path(folder->run_dir) / "ckpt.pt"), 2u);
  EXPECT_EQ(Read(fs::path(folder->run_dir) / "events.jsonl"), "{}\n");
  // A link planted where the history is copied to: refused, its target untouched.
  fs::create_directories(dir_ / "runs/trial-9/attempt-3");
  fs::create_symlink(outside_, dir_ / "runs/trial-9/attempt-3/events.jsonl");
  EXPECT_EQ(Prepare(Lease(9, 3)).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Read(outside_), "precious\n");
  // A checkpoint that is a link to another file is not taken over.
  fs::create_directories(dir_ / "runs/trial-10/attempt-1");
  fs::create_symlink(outside_, dir_ / "runs/trial-10/attempt-1/ckpt.pt");
  EXPECT_EQ(Prepare(Lease(10, 2)).status().code(), absl::StatusCode::kFailedPrecondition);
}

// Waits (bounded) until `process` exited and its output was read.
bool WaitForExit(TrainerProcess& process) {
  for (int i = 0; i < 500; ++i) {
    if (process.Exited()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

TEST_F(LaunchTest, APlantedRankLogLinkIsRefusedBeforeTheTrainerStarts) {
  const fs::path log = dir_ / "work/rank0.log";
  fs::create_symlink(outside_, log);
  ProcessSpec spec;
  spec.argv = {"/bin/sh", "-c", "echo appended >&2"};
  spec.log_path = log.string();
  absl::StatusOr<std::unique_ptr<TrainerProcess>> process =
      TrainerProcess::Start(spec, [](const std::string&, size_t) {});
  EXPECT_EQ(process.status().code(), absl::StatusCode::kFailedPrecondition) << process.status();
  EXPECT_NE(process.status().message().find("rank0.log: it is a symbolic link"), std::string::npos)
      << process.status();
  if (process.ok()) {
    ASSERT_TRUE(WaitForExit(**process));
  }
  EXPECT_EQ(Read(outside_), "precious\n");
}

TEST_F(LaunchTest, TrainerStderrIsEscapedInItsLogAndTail) {
  ProcessSpec spec;
  // A clear-screen, a colour and a line overwritten by a carriage return, as a trainer printing a
  // submitter's text could emit them; the traceback's newlines and tabs stay.
  spec.argv = {"/bin/sh", "-c", "printf 'E\\033[2J\\033[31mred\\tx\\rfake\\n\\302\\233tail' >&2"};
  spec.log_path = (dir_ / "work/rank0.log").string();
  absl::StatusOr<std::unique_ptr<TrainerProcess>> process =
      TrainerProcess::Start(spec, [](const std::string&, size_t) {});
  ASSERT_TRUE(process.ok()) << process.status();
  ASSERT_TRUE(WaitForExit(**process));
  const std::string expected = "E\\x1b[2J\\x1b[31mred\tx\\rfake\n\\u009btail";
  EXPECT_EQ((*process)->StderrTail(), expected);
  EXPECT_EQ(Read(spec.log_path), expected);
  struct stat info;
  ASSERT_EQ(stat(spec.log_path.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
}

WorkerOptions Options(const fs::path& work_dir) {
  WorkerOptions options;
  options.cpu_slots = 1;
  options.lm_binary = "/bin/true";
  options.work_dir = work_dir.string();
  return options;
}

TEST_F(LaunchTest, AWorkDirOthersMayWriteIsRefusedAtStartUp) {
  WorkerOptions fresh = Options(dir_ / "fresh");
  ASSERT_TRUE(ValidateWorkerOptions(&fresh).ok());
  EXPECT_EQ(fs::status(dir_ / "fresh").permissions() & fs::perms::all, fs::perms::owner_all);
  EXPECT_EQ(fs::status(dir_ / "fresh/runs").permissions() & fs::perms::all, fs::perms::owner_all);

  fs::create_directories(dir_ / "shared");
  fs::permissions(dir_ / "shared", fs::perms::all);  // 0777, as /tmp without its sticky bit
  WorkerOptions shared = Options(dir_ / "shared");
  const absl::Status refused = ValidateWorkerOptions(&shared);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("--work-dir " + (dir_ / "shared").string() +
                                   " is not private: owner uid " + std::to_string(geteuid())),
            std::string::npos)
      << refused;
  EXPECT_NE(refused.message().find("mode 0777"), std::string::npos) << refused;

  WorkerOptions root = Options(dir_ / "fresh");
  root.checkpoint_root = (dir_ / "shared").string();
  EXPECT_NE(ValidateWorkerOptions(&root).message().find("--checkpoint-root"), std::string::npos);
}

TEST_F(LaunchTest, AWorkDirOfAnotherUserIsRefused) {
  fs::create_directories(dir_ / "theirs");
  if (chown((dir_ / "theirs").c_str(), 65534, 65534) != 0) {
    GTEST_SKIP() << "only root can give a folder to another user";
  }
  WorkerOptions options = Options(dir_ / "theirs");
  const absl::Status refused = ValidateWorkerOptions(&options);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("is not private: owner uid 65534"), std::string::npos)
      << refused;
}

}  // namespace
}  // namespace spheret::worker
