// What a killed worker leaves, with real processes and signals: a trainer dies with the thread
// that started it (PR_SET_PDEATHSIG), its record lives while it runs, and a starting worker ends
// the process groups an earlier one recorded (leader alive, or gone with a member left), but not
// a process whose pid was reused, nor one named by a record of another boot or behind a link.
#include "worker/daemon/trainer_records.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "worker/daemon/trainer_process.h"

namespace spheret::worker {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string Read(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The processes of group `pgid` that have not exited, by a scan of /proc.
std::vector<pid_t> LiveGroup(pid_t pgid) {
  std::vector<pid_t> live;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;  // "self", ...
    const std::string text = Read(entry.path() / "stat");
    const size_t end = text.rfind(')');
    if (end == std::string::npos) continue;
    std::istringstream fields(text.substr(end + 1));
    char state = '?';
    pid_t ppid = 0, group = 0;
    if (fields >> state >> ppid >> group && group == pgid && state != 'Z' && state != 'X') {
      live.push_back(std::stoi(name));
    }
  }
  return live;
}

// Whether group `pgid` has `size` live processes within `ms`.
bool GroupSizeWithin(pid_t pgid, size_t size, int ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(ms);
  while (LiveGroup(pgid).size() != size && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return LiveGroup(pgid).size() == size;
}

class TrainerRecordsTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        fs::temp_directory_path() / ("spheret_records_test_" + std::to_string(getpid()) + "_" +
                                     testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "work" / kTrainersFolder);
    fs::permissions(dir_ / "work", fs::perms::owner_all);
    fs::permissions(dir_ / "work" / kTrainersFolder, fs::perms::owner_all);
  }
  void TearDown() override {
    for (pid_t pid : started_) kill(-pid, SIGKILL);
    for (pid_t pid : started_) waitpid(pid, nullptr, 0);
    fs::remove_all(dir_);
  }

  // Starts `script` under /bin/sh as the leader of its own group, as an earlier worker without
  // a parent-death signal for it would have (it dies with this test process, though).
  pid_t StartGroup(const std::string& script) {
    const pid_t pid = fork();
    if (pid == 0) {
      setpgid(0, 0);
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      execl("/bin/sh", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    setpgid(pid, pid);
    started_.push_back(pid);
    return pid;
  }

  fs::path Record(const std::string& name) { return dir_ / "work" / kTrainersFolder / name; }

  void WriteRecord(const std::string& name, pid_t pid) {
    absl::StatusOr<UniqueFd> record = CreateTrainerRecord(Record(name).string());
    ASSERT_TRUE(record.ok()) << record.status();
    ASSERT_TRUE(WriteTrainerRecord(*record, Record(name).string(), pid).ok());
  }

  absl::StatusOr<std::vector<std::string>> EndLeftovers() {
    absl::StatusOr<TrainerRecords> records = TrainerRecords::Claim((dir_ / "work").string());
    if (!records.ok()) return records.status();
    return records->EndLeftovers(2'000);
  }

  fs::path dir_;
  std::vector<pid_t> started_;
};

TEST_F(TrainerRecordsTest, ATrainerDiesWithTheThreadThatStartedItAndItsRecordGoesWithIt) {
  ProcessSpec spec;
  spec.argv = {"/bin/sleep", "30"};
  spec.record_path = Record("trial-1-attempt-1-rank0").string();
  std::unique_ptr<TrainerProcess> trainer;
  std::thread starter([&] {
    absl::StatusOr<std::unique_ptr<TrainerProcess>> started =
        TrainerProcess::Start(spec, [](const std::string&, size_t) {});
    ASSERT_TRUE(started.ok()) << started.status();
    trainer = std::move(*started);
    std::istringstream record(Read(spec.record_path));
    pid_t pid = 0;
    record >> pid;
    EXPECT_EQ(pid, trainer->pid()) << "recorded while it runs: " << Read(spec.record_path);
    // The child asks for the signal between fork and exec; this thread may end only after that
    // (the worker's forking thread lives as long as the worker; a thread ending sooner is this
    // test's stand-in for it), so wait for the exec.
    const auto exec_deadline = Clock::now() + std::chrono::seconds(10);
    while (Read("/proc/" + std::to_string(pid) + "/cmdline").rfind("/bin/sleep", 0) != 0 &&
           Clock::now() < exec_deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  starter.join();  // the thread that forked it ends: as if the worker died
  ASSERT_NE(trainer, nullptr);
  // The signal is immediate; the bound leaves room for a loaded machine (the child sleeps 30 s).
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (!trainer->Exited() && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(trainer->Exited()) << "the trainer outlived its starter by 10 s";
  EXPECT_TRUE(trainer->killed_by_signal());
  EXPECT_EQ(trainer->exit_code(), 128 + SIGKILL);
  EXPECT_FALSE(fs::exists(spec.record_path)) << "the record of a reaped trainer is removed";
}

TEST_F(TrainerRecordsTest, ALeftoverGroupIsEndedWithItsLeaderOrAfterIt) {
  const pid_t alive = StartGroup("sleep 30 & exec sleep 31");  // leader and a member
  const pid_t gone = StartGroup("sleep 30 & exit 0");          // the leader exits, a member stays
  WriteRecord("trial-1-attempt-1-rank0", alive);
  WriteRecord("trial-2-attempt-1-rank0", gone);
  ASSERT_EQ(waitpid(gone, nullptr, 0), gone);
  ASSERT_TRUE(GroupSizeWithin(alive, 2, 5'000));
  ASSERT_TRUE(GroupSizeWithin(gone, 1, 5'000));
  absl::StatusOr<std::vector<std::string>> ended = EndLeftovers();
  ASSERT_TRUE(ended.ok()) << ended.status();
  ASSERT_EQ(ended->size(), 2u);
  for (const std::string& line : *ended) {
    EXPECT_NE(line.find("that an earlier worker left running"), std::string::npos) << line;
  }
  EXPECT_TRUE(GroupSizeWithin(alive, 0, 1'000));
  EXPECT_TRUE(GroupSizeWithin(gone, 0, 1'000));
  EXPECT_TRUE(fs::is_empty(dir_ / "work" / kTrainersFolder)) << "every record is removed";
}

TEST_F(TrainerRecordsTest, AReusedPidAnotherBootAndALinkEndNothing) {
  const pid_t other = StartGroup("exec sleep 30");
  ASSERT_TRUE(GroupSizeWithin(other, 1, 5'000));
  // Its pid with another start time: the recorded process is gone and the pid reused.
  WriteRecord("trial-1-attempt-1-rank0", other);
  std::istringstream fields(Read(Record("trial-1-attempt-1-rank0")));
  std::string pid, start, session, boot;
  fields >> pid >> start >> session >> boot;
  std::ofstream(Record("trial-1-attempt-1-rank0"))
      << pid << " " << std::stoull(start) - 1 << " " << session << " " << boot << "\n";
  std::ofstream(Record("trial-2-attempt-1-rank0"))
      << pid << " " << start << " " << session << " 00000000-0000-0000-0000-000000000000\n";
  // A link to a valid record elsewhere is refused, not followed, and removed (the target stays).
  std::ofstream(dir_ / "elsewhere") << pid << " " << start << " " << session << " " << boot << "\n";
  fs::create_symlink(dir_ / "elsewhere", Record("trial-3-attempt-1-rank0"));
  std::ofstream(Record("trial-4-attempt-1-rank0")) << std::string(1000, '7');
  absl::StatusOr<std::vector<std::string>> ended = EndLeftovers();
  ASSERT_TRUE(ended.ok()) << ended.status();
  const std::string all = ended->empty() ? "" : (*ended)[0] + "\n" + ended->back();
  ASSERT_EQ(ended->size(), 2u) << all;
  EXPECT_NE(all.find("trial-3-attempt-1-rank0: it is a symbolic link"), std::string::npos) << all;
  EXPECT_NE(all.find("over the limit of 256 bytes"), std::string::npos) << all;
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(LiveGroup(other).size(), 1u) << "a process no record names was ended";
  EXPECT_TRUE(fs::exists(dir_ / "elsewhere"));
  EXPECT_TRUE(fs::is_empty(dir_ / "work" / kTrainersFolder));
}

TEST_F(TrainerRecordsTest, TwoWorkersNeverShareAWorkDir) {
  absl::StatusOr<TrainerRecords> first = TrainerRecords::Claim((dir_ / "work").string());
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<TrainerRecords> second = TrainerRecords::Claim((dir_ / "work").string());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(second.status().message().find("another spheret-worker runs on it"), std::string::npos)
      << second.status();
  first = absl::CancelledError("released");
  EXPECT_TRUE(TrainerRecords::Claim((dir_ / "work").string()).ok()) << "the lock goes with it";
  // A link where the records go is refused.
  fs::remove_all(dir_ / "work" / kTrainersFolder);
  fs::create_symlink(dir_, dir_ / "work" / kTrainersFolder);
  EXPECT_EQ(TrainerRecords::Claim((dir_ / "work").string()).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace spheret::worker
