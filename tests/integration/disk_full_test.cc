// The disk-full test (ctest label fault): the coordinator's database on a small tmpfs that fills up
// while a sweep runs. Commits fail (SQLITE_FULL) for a while; nothing acknowledged may be lost, and
// once space returns every trial must end, with its whole curve. Needs the right to mount a tmpfs
// (root, as in CI); skipped, saying so, where that is refused.
#include <sys/mount.h>

#include <cerrno>
#include <cstring>

#include "tests/integration/cluster_fixture.h"

namespace spheret {
namespace {

using testing_util::Base;
using testing_util::Clock;
namespace fs = std::filesystem;

constexpr int kSteps = 40;

class DiskFullTest : public testing_util::ClusterTest {
 protected:
  void SetUp() override {
    // The fixture's coordinator runs on the ordinary disk; this test starts its own on the tmpfs.
    lease_ttl_s_ = 3;  // full for longer than a lease TTL: 4 s
    ClusterTest::SetUp();
    coordinator_.reset();
    volume_ = dir_ / "volume";
    fs::create_directories(volume_);
    if (mount("spheret-test", volume_.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "size=8m") != 0) {
      GTEST_SKIP() << "cannot mount a tmpfs at " << volume_ << " (" << std::strerror(errno)
                   << "): the disk-full test needs root or CAP_SYS_ADMIN";
    }
    mounted_ = true;
    db_ = volume_ / "spheret.db";
    retry_backoff_s_ = "0.5";
  }
  void TearDown() override {
    workers_.clear();
    coordinator_.reset();
    if (mounted_) umount2(volume_.c_str(), MNT_DETACH);
    ClusterTest::TearDown();
  }

  // Writes zeros into the volume until it is full; returns the bytes written.
  int64_t Fill() {
    std::ofstream filler(volume_ / "filler", std::ios::binary);
    const std::string block(64 << 10, '\0');
    int64_t written = 0;
    while (filler.write(block.data(), block.size()) && filler.flush()) written += block.size();
    return written;
  }

  fs::path volume_;
  bool mounted_ = false;
};

TEST_F(DiskFullTest, NoAcknowledgedWriteIsLostAndEveryTrialEndsAfterSpaceReturns) {
  StartCoordinator("127.0.0.1:0");
  StartWorker("a", 1);
  StartWorker("b", 1);
  const int64_t sweep = Submit("name: full\ndataset: tiny\nbase: " + Base(kSteps, 10) +
                               "\nparameters:\n  method: {values: [pre_ln, geonorm]}\n"
                               "seeds: [1, 2]\nmax_restarts: 50\n");
  ASSERT_GT(sweep, 0);
  ASSERT_TRUE(WaitFor(sweep, 120, [](const std::vector<v1::Trial>& trials) {
    return std::any_of(trials.begin(), trials.end(),
                       [](const v1::Trial& t) { return LatestStep(t) >= 5; });
  })) << Log("a") << Log("coordinator");
  const int64_t filled = Fill();
  ASSERT_GT(filled, 0);
  // Metrics keep coming and leases keep being renewed: commits fail while the volume is full.
  const auto full_since = Clock::now();
  while (Log("coordinator").find("disk is full") == std::string::npos &&
         Clock::now() - full_since < std::chrono::seconds(60)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_NE(Log("coordinator").find("disk is full"), std::string::npos)
      << "the coordinator never hit the full disk (" << filled << " bytes filled)";
  std::this_thread::sleep_for(std::chrono::seconds(lease_ttl_s_ + 1));  // past a lease TTL
  fs::remove(volume_ / "filler");
  ASSERT_TRUE(WaitFor(sweep, 300, [](const std::vector<v1::Trial>& trials) {
    return All(trials, v1::TRIAL_STATE_SUCCEEDED);
  })) << Log("coordinator") << Log("a") << Log("b");
  EXPECT_EQ(kill(coordinator_->pid(), 0), 0) << "the coordinator survived the full disk";
  for (const v1::Trial& trial : Trials(sweep)) {
    const std::string where = " FROM curves WHERE metric = 'train/loss' AND trial_id = " +
                              std::to_string(trial.trial_id());
    EXPECT_EQ(Query("SELECT count(*)" + where), kSteps) << "trial " << trial.trial_id();
    EXPECT_EQ(Query("SELECT count(DISTINCT step)" + where), kSteps);
  }
  EXPECT_EQ(Query("SELECT count(*) FROM trials WHERE state <> 'SUCCEEDED'"), 0);
  EXPECT_EQ(Query("SELECT count(*) FROM leases"), 0);
  EXPECT_EQ(Query("SELECT count(*) FROM pragma_integrity_check WHERE integrity_check = 'ok'"),
            1);
}

}  // namespace
}  // namespace spheret
