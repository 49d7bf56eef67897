// Issue 44, item 2: a worker killed with SIGKILL left its trainers running (own process group, no
// parent-death signal) until their next write, and its restart ran attempt 2 of their trials on
// the same slots beside attempt 1. Real coordinator, workers, spheret-lm and signals; the trainers
// log only at step 0 (log_interval and eval_interval past the run), so nothing they write ends
// them, as a trainer between evaluations on a large model would.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "tests/integration/cluster_fixture.h"

namespace spheret {
namespace {

namespace fs = std::filesystem;
using testing_util::Env;
using Clock = std::chrono::steady_clock;

// A long run that prints its step 0 (train/loss, val/loss, a checkpoint) and then nothing.
const std::string kQuietSweep =
    "dataset: tiny\nbase: {scale: xs, block_size: 32, batch_size: 4, "
    "gradient_accumulation_steps: 1, max_iters: 1000000, warmup_iters: 2, "
    "lr_decay_iters: 1000000, eval_interval: 1000000, eval_iters: 2, log_interval: 1000000, "
    "learning_rate: 1e-3}\nparameters:\n  method: {values: [pre_ln]}\n";

struct Process {
  pid_t pid, ppid, pgid;
  std::string comm;
};

// Every process that has not exited (zombies are done), from /proc.
std::vector<Process> LiveProcesses() {
  std::vector<Process> live;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;  // "self", ...
    std::ifstream in(entry.path() / "stat");
    std::string text;
    if (!std::getline(in, text)) continue;
    const size_t open = text.find('('), end = text.rfind(')');
    if (open == std::string::npos || end == std::string::npos) continue;
    std::istringstream fields(text.substr(end + 1));
    char state = '?';
    Process process{0, 0, 0, text.substr(open + 1, end - open - 1)};
    if (!(fields >> state >> process.ppid >> process.pgid) || state == 'Z' || state == 'X')
      continue;
    process.pid = std::stoi(name);
    live.push_back(process);
  }
  return live;
}

// The live processes that are in one of `groups` (the groups a worker's trainers lead).
std::vector<Process> InGroups(const std::set<pid_t>& groups) {
  std::vector<Process> found;
  for (const Process& process : LiveProcesses()) {
    if (groups.count(process.pgid) > 0) found.push_back(process);
  }
  return found;
}

std::string Describe(const std::vector<Process>& processes) {
  std::string text;
  for (const Process& p : processes) {
    text += "pid " + std::to_string(p.pid) + " (" + p.comm + ") of group " +
            std::to_string(p.pgid) + ", parent " + std::to_string(p.ppid) + "\n";
  }
  return text.empty() ? "none\n" : text;
}

class OrphansTest : public testing_util::ClusterTest {
 protected:
  void SetUp() override {
    retry_backoff_s_ = "0.5";  // attempt 2 follows the hand-back of attempt 1 at once
    ClusterTest::SetUp();
  }
  void TearDown() override {
    workers_.clear();
    for (pid_t group : groups_) kill(-group, SIGKILL);  // whatever a failed run left
    ClusterTest::TearDown();
  }

  // The process groups the children of `worker` lead (each trainer leads its own), once there
  // are `count` of them (waits up to 60 s).
  std::set<pid_t> TrainerGroups(pid_t worker, size_t count) {
    std::set<pid_t> groups;
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    while (groups.size() < count && Clock::now() < deadline) {
      for (const Process& process : LiveProcesses()) {
        if (process.ppid == worker) groups.insert(process.pgid);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    groups_.insert(groups.begin(), groups.end());
    return groups;
  }

  std::set<pid_t> groups_;
};

// Done when: after kill -9 of a worker, no process of its remains within a second.
TEST_F(OrphansTest, KilledWorkerLeavesNoTrainerRunningASecondLater) {
  testing_util::ChildProcess& a = StartWorker("a", 2);
  const int64_t sweep = Submit("name: quiet\n" + kQuietSweep + "seeds: [1, 2]\n");
  ASSERT_TRUE(WaitFor(sweep, 120, [](auto& trials) {
    return trials.size() == 2 && LatestStep(trials[0]) >= 0 && LatestStep(trials[1]) >= 0;
  })) << Log("a");
  const std::set<pid_t> groups = TrainerGroups(a.pid(), 2);
  ASSERT_EQ(groups.size(), 2u) << Describe(LiveProcesses());
  std::printf("the worker's trainers before kill -9:\n%s", Describe(InGroups(groups)).c_str());
  a.Signal(SIGKILL);
  const auto killed = Clock::now();
  while (!InGroups(groups).empty() && Clock::now() - killed < std::chrono::seconds(1)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const std::vector<Process> left = InGroups(groups);
  std::printf("one second after kill -9, still running:\n%s", Describe(left).c_str());
  EXPECT_TRUE(left.empty()) << "the killed worker left its trainers running:\n" << Describe(left);
}

// Done when: a restarted worker never runs two attempts of one trial at once. Its trainer starts
// a helper in its process group (as a launcher or a data loader would) that no parent-death
// signal reaches; the restarted worker ends the group before it registers, so before attempt 2.
TEST_F(OrphansTest, RestartedWorkerEndsWhatItsEarlierInstanceLeftBeforeAttemptTwo) {
  const fs::path lm = dir_ / "helper-lm.sh";
  std::ofstream(lm) << "#!/bin/sh\nsleep 300 &\nexec " << Env("SPHERET_LM") << " \"$@\"\n";
  fs::permissions(lm, fs::perms::owner_all);
  testing_util::ChildProcess& a = StartWorker("a", 1, "", lm.string());
  const int64_t sweep = Submit("name: restart\n" + kQuietSweep);
  ASSERT_TRUE(WaitFor(sweep, 120, [](auto& t) { return LatestStep(t[0]) >= 0; })) << Log("a");
  const std::set<pid_t> first = TrainerGroups(a.pid(), 1);
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(InGroups(first).size(), 2u) << "spheret-lm and its helper:\n"
                                        << Describe(InGroups(first));
  std::printf("attempt 1 before kill -9:\n%s", Describe(InGroups(first)).c_str());
  a.Signal(SIGKILL);
  testing_util::ChildProcess& again = StartWorker("a", 1, "", lm.string());
  // Attempt 2 starts on the restarted worker once the lease of attempt 1 is given up.
  std::set<pid_t> second;
  const auto deadline = Clock::now() + std::chrono::seconds(45);
  std::vector<Process> left;
  while (second.empty() && Clock::now() < deadline) {
    left = InGroups(first);  // read before the new trainer is looked for
    for (const Process& process : LiveProcesses()) {
      if (process.ppid == again.pid() && first.count(process.pgid) == 0)
        second.insert(process.pgid);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  groups_.insert(second.begin(), second.end());
  ASSERT_EQ(second.size(), 1u) << "attempt 2 did not start: " << Log("a");
  EXPECT_EQ(Trials(sweep)[0].attempt(), 2);
  std::printf("when attempt 2 started, attempt 1 still ran:\n%s", Describe(left).c_str());
  EXPECT_TRUE(left.empty()) << "attempt 2 started beside attempt 1:\n" << Describe(left);
  const std::string log = Log("a");
  const size_t ended = log.find("that an earlier worker left running");
  EXPECT_NE(ended, std::string::npos) << log;
  EXPECT_LT(ended, log.find("attempt 2: started")) << "ended before attempt 2 started: " << log;
}

}  // namespace
}  // namespace spheret
