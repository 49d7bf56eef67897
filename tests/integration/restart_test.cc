// Issue 44, item 1: a trial that finished while the coordinator was away is not thrown away.
// Real processes on loopback: spheret-coordinator, spheret-worker and a fake trainer (a shell
// script that prints a train/loss metric every 0.05 s (0.1 s in RestartAll), then ends as its seed
// decides: seed % 3 == 1 "done" and exit 0, == 0 "diverged" and exit 3, == 2 exit 1; on SIGTERM it
// prints "stopped" and exits 4, as spheret-lm does after its checkpoint). Before the fix the
// outcome spooled by the worker was refused ("is not live") once its lease had expired, or once the
// worker had registered again without listing it: the trial ended FAILED although its trainer
// exited 0. The order of events is forced by events (a gate file the trainer waits at, the worker's
// log, the trial's state), never by a pace; each wait is bounded by a minute.
#include <signal.h>

#include <random>

#include "tests/integration/cluster_fixture.h"

namespace spheret {
namespace {

using testing_util::ChildProcess;
namespace fs = std::filesystem;

// The fake trainer of `steps` steps; with a `gate` path, it waits after the first half of its
// steps until that file exists.
std::string FakeTrainer(int steps, const std::string& gate, const std::string& step_s) {
  const std::string wait = gate.empty()
                               ? ""
                               : "  [ $s -eq " + std::to_string(steps / 2) +
                                     " ] && while [ ! -e '" + gate + "' ]; do sleep 0.05; done\n";
  return "#!/bin/sh\n"
         "while [ $# -gt 0 ]; do [ \"$1\" = --config ] && config=$2; shift; done\n"
         "seed=$(sed -n 's/.*\"seed\":\\([0-9]*\\).*/\\1/p' \"$config\")\n"
         "s=0\n"
         "trap 'echo \"{\\\"type\\\":\\\"stopped\\\",\\\"step\\\":$s}\"; exit 4' TERM\n"
         "while [ $s -lt " +
         std::to_string(steps) + " ]; do\n" + wait +
         "  echo \"{\\\"type\\\":\\\"metric\\\",\\\"step\\\":$s,\\\"name\\\":\\\"train/loss\\\","
         "\\\"value\\\":2.5}\"\n"
         "  s=$((s + 1))\n"
         "  sleep " +
         step_s +
         "\n"
         "done\n"
         "case $((seed % 3)) in\n"
         "  0) echo \"{\\\"type\\\":\\\"diverged\\\",\\\"step\\\":$s}\"; exit 3 ;;\n"
         "  2) echo 'the trainer decided to fail' >&2; exit 1 ;;\n"
         "esac\n"
         "echo \"{\\\"type\\\":\\\"done\\\",\\\"step\\\":$s}\"\n";
}

class RestartTest : public testing_util::ClusterTest {
 protected:
  static constexpr int kSteps = 20;  // 10 before the gate, 10 after it

  void SetUp() override {
    lease_ttl_s_ = 6;
    retry_backoff_s_ = "0.5";
    grace_ms_ = 1'000;  // the worker's flush of its spool to the absent coordinator gives up after
    ClusterTest::SetUp();
    fake_lm_ = (dir_ / "fake-lm.sh").string();
    std::ofstream(fake_lm_) << FakeTrainer(steps_, gated_ ? (dir_ / "gate").string() : "", step_s_);
    fs::permissions(fake_lm_, fs::perms::owner_all);
  }

  ChildProcess& Start(const std::string& worker) { return StartWorker(worker, 1, "", fake_lm_); }

  static void Sleep(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

  // Issue 44's reproduction up to the worker's return: one trial (max_restarts: 0, a trainer that
  // succeeds). Once its first metrics are stored the coordinator is SIGKILLed; then the trainer
  // passes its gate, prints the second half of its curve and exits 0 (its last batch and its
  // Finish wait in the worker's spool); the worker gets SIGTERM, gives up flushing its spool and
  // is gone; the coordinator starts again and, once the trial is in `state_before_return`
  // (RUNNING at once; FAILED when the lease lapsed, a TTL later), the worker is back. The
  // coordinator's lease TTL is `ttl_s`. Returns the sweep (0: it failed).
  int64_t FinishWhileTheCoordinatorIsAway(int ttl_s, const std::string& state_before_return) {
    lease_ttl_s_ = ttl_s;
    coordinator_.reset();
    StartCoordinator("127.0.0.1:0");
    Start("a");
    const int64_t sweep = Submit(
        "name: restart\ndataset: tiny\nbase: {scale: xs}\nparameters:\n  method: {values: "
        "[pre_ln]}\nseeds: [1]\nmax_restarts: 0\n");
    const auto running = [](const std::vector<v1::Trial>& t) {
      return t[0].state() == v1::TRIAL_STATE_RUNNING && LatestStep(t[0]) >= 0;
    };
    if (sweep <= 0 || !WaitFor(sweep, 60, running)) return 0;
    coordinator_->Signal(SIGKILL);
    std::ofstream(dir_ / "gate") << "open\n";
    if (!WaitUntil(60, [&] { return Log("a").find("trainer exited 0") != std::string::npos; })) {
      return 0;
    }
    // It tries to flush its spool for --grace, says so and would then wait out the deadline of
    // its last call to the absent coordinator: SIGKILL once its spool is on disk.
    workers_["a"]->Send(SIGTERM);
    if (!WaitUntil(60, [&] { return Log("a").find("still in the spool") != std::string::npos; })) {
      return 0;
    }
    workers_["a"]->Signal(SIGKILL);
    StartCoordinator("127.0.0.1:" + std::to_string(port_));
    const auto state = [&] { return QueryText("SELECT state FROM trials"); };
    WaitUntil(60, [&] { return state() == state_before_return; });
    EXPECT_EQ(state(), state_before_return) << Log("coordinator");
    Start("a");
    return sweep;
  }
  // The trial ended SUCCEEDED in its only attempt, charged no failure, and stored its curve with
  // every step once.
  void ExpectAsIfNothingRestarted(int64_t sweep) {
    ASSERT_GT(sweep, 0) << Log("coordinator") << Log("a");
    const bool succeeded = WaitFor(sweep, 30, [](const std::vector<v1::Trial>& t) {
      return All(t, v1::TRIAL_STATE_SUCCEEDED);
    });
    std::cout << "trial: " << QueryText("SELECT state || ', ' || error FROM trials")
              << "; attempts: "
              << QueryText(
                     "SELECT group_concat(attempt || ' ' || outcome || ' ' || stderr_tail, "
                     "'; ') FROM attempts")
              << "\n";
    ASSERT_TRUE(succeeded) << Log("coordinator") << Log("a");
    EXPECT_EQ(Query("SELECT failures FROM trials"), 0);
    EXPECT_EQ(Query("SELECT attempt FROM trials"), 1);
    EXPECT_EQ(Query("SELECT count(*) FROM attempts WHERE outcome = 'SUCCEEDED'"), 1);
    EXPECT_EQ(Query("SELECT count(*) FROM attempts"), 1);
    ExpectCompleteCurve(Trials(sweep)[0].trial_id(), kSteps);
    EXPECT_EQ(Query("SELECT count(*) FROM scalars"), kSteps) << "every step stored once";
    EXPECT_EQ(Query("SELECT count(*) FROM leases"), 0);
    EXPECT_EQ(QueryText("SELECT state FROM sweeps"), "DONE");
  }

  int steps_ = kSteps;
  bool gated_ = true;
  std::string step_s_ = "0.05";  // the fake trainer's seconds a step
  std::string fake_lm_;
};

// The worker is back once the lease has expired (the coordinator's TTL of 3 s after its restart;
// the trial was FAILED, max_restarts 0), and its spooled outcome still counts.
TEST_F(RestartTest, ATrialFinishedWhileTheCoordinatorWasAwayCountsWhenItsWorkerIsBackAfterTheTtl) {
  ExpectAsIfNothingRestarted(FinishWhileTheCoordinatorIsAway(3, "FAILED"));
}

// The worker is back at once, well within the TTL of 6 s: its Register lists the attempt whose
// Finish waits in its spool, so its lease is kept until the Finish arrives.
TEST_F(RestartTest, ATrialFinishedWhileTheCoordinatorWasAwayCountsWhenItsWorkerIsBackWithinTheTtl) {
  ExpectAsIfNothingRestarted(FinishWhileTheCoordinatorIsAway(6, "RUNNING"));
}

// The coordinator (SIGKILL) and every worker (SIGTERM: their trainers stop and hand their trials
// back while the coordinator is away) restart together, twice, at moments drawn from the seed
// (RestartAll); the workers come back within or past the lease TTL. Every trial (max_restarts: 0)
// ends as its trainer decided, with no attempt ended by a lease, and whole curves.
class RestartAllTest : public RestartTest, public testing::WithParamInterface<int> {
 protected:
  void SetUp() override {
    steps_ = kChaosSteps;
    gated_ = false;
    step_s_ = "0.1";
    RestartTest::SetUp();
    grace_ms_ = 5'000;  // RestartAll's long absence is timed against it
  }
  static constexpr int kChaosSteps = 20;  // 2 s of training
  static constexpr size_t kTrials = 9;

  // One restart of everything, while trainers run: the coordinator is SIGKILLed and every worker
  // gets SIGTERM; the coordinator is back within 3 s or, `long_away`, after 5.5-7.5 s (longer
  // than the workers' --grace of 5 s: they exit with the hand-backs of their stopped trainers
  // still in their spools, and the last one comes back 7-9 s after the coordinator, past the TTL
  // of 6 s). Returns what it did, for the log.
  std::string RestartAll(std::mt19937& rng, bool long_away) {
    Sleep(500 + static_cast<int>(rng() % 2'500));
    coordinator_->Signal(SIGKILL);
    for (const char* name : {"a", "b", "c"}) workers_[name]->Send(SIGTERM);
    const int away_ms = static_cast<int>(long_away ? 5'500 + rng() % 2'000 : rng() % 3'000);
    Sleep(away_ms);
    StartCoordinator("127.0.0.1:" + std::to_string(port_));
    const auto back = std::chrono::steady_clock::now();
    std::string log = "SIGKILL coordinator, SIGTERM workers, coordinator back after " +
                      std::to_string(away_ms) + " ms;";
    for (const char* name : {"a", "b", "c"}) {
      workers_[name]->Wait();
      const bool last = std::string(name) == "c";
      Sleep(static_cast<int>(rng() % 2'000));
      if (long_away && last) {
        std::this_thread::sleep_until(back + std::chrono::milliseconds(7'000 + rng() % 2'000));
      }
      Start(name);
      log += std::string(" ") + name + " back " +
             std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::steady_clock::now() - back)
                                .count()) +
             " ms after it;";
    }
    return log + "\n";
  }

  // Every worker has started `starts` times and registered since its last start. A worker that
  // comes back past its lease brings the lapsed attempt with it, and the coordinator revives it as
  // the worker registers: until then the lapse reads as the trial's end (FAILED), so the trials'
  // states say how the run ended only once every worker is back in.
  bool AllRegistered(int starts) {
    for (const char* name : {"a", "b", "c"}) {
      const std::string log = Log(name), start = std::string("spheret-worker ") + name + ":";
      size_t last = std::string::npos;
      int seen = 0;
      for (size_t at = 0; (at = log.find(start, at)) != std::string::npos; last = at++) ++seen;
      if (seen < starts ||
          log.find(std::string("registered as ") + name, last) == std::string::npos) {
        return false;
      }
    }
    return true;
  }

  // Each trial of `sweep` ended as its fake trainer decides by its seed (seed % 3: 1 SUCCEEDED
  // with its whole curve, 0 DIVERGED, 2 FAILED), whatever restarts happened (`log`).
  void ExpectEndedAsTheirSeedsDecide(int64_t sweep, const std::string& log) {
    for (const v1::Trial& trial : Trials(sweep)) {
      const std::string id = std::to_string(trial.trial_id());
      const int64_t seed = Query(
          "SELECT json_extract(config_json, '$.seed') FROM trials WHERE "
          "trial_id = " +
          id);
      const v1::TrialState decided = seed % 3 == 1   ? v1::TRIAL_STATE_SUCCEEDED
                                     : seed % 3 == 0 ? v1::TRIAL_STATE_DIVERGED
                                                     : v1::TRIAL_STATE_FAILED;
      EXPECT_EQ(v1::TrialState_Name(trial.state()), v1::TrialState_Name(decided))
          << "trial " << id << " (seed " << seed
          << "): " << QueryText("SELECT error FROM trials WHERE trial_id = " + id) << "\n"
          << log;
      if (decided == v1::TRIAL_STATE_SUCCEEDED) ExpectCompleteCurve(trial.trial_id(), kChaosSteps);
    }
  }
};

TEST_P(RestartAllTest, RestartingTheCoordinatorAndEveryWorkerTogetherChangesNoOutcome) {
  std::mt19937 rng(GetParam());
  for (const char* name : {"a", "b", "c"}) Start(name);
  const int64_t sweep = Submit(
      "name: restart-all\ndataset: tiny\nbase: {scale: xs}\nparameters:\n  method: {values: "
      "[pre_ln]}\nseeds: [1, 2, 3, 4, 5, 6, 7, 8, 9]\nmax_restarts: 0\n");
  ASSERT_GT(sweep, 0);
  std::string log;
  const int rounds = 2;
  for (int round = 0; round < rounds; ++round) {
    log += RestartAll(rng, /*long_away=*/round == rounds - 1);
  }
  ASSERT_TRUE(WaitUntil(60, [&] { return AllRegistered(1 + rounds); })) << log;
  const auto ended = [](const std::vector<v1::Trial>& trials) {
    return trials.size() == kTrials && std::none_of(trials.begin(), trials.end(), [](auto& t) {
             return t.state() == v1::TRIAL_STATE_PENDING || t.state() == v1::TRIAL_STATE_RUNNING;
           });
  };
  ASSERT_TRUE(WaitFor(sweep, 45, ended)) << log << Log("coordinator");
  const std::string coordinator_log = Log("coordinator");
  size_t revived = 0;
  for (size_t at = 0; (at = coordinator_log.find("revived", at)) != std::string::npos; ++at) {
    ++revived;
  }
  std::cout << "restart-all seed " << GetParam() << ": " << Query("SELECT sum(attempt) FROM trials")
            << " attempts for " << kTrials << " trials, " << revived
            << " lapsed attempt(s) revived\n"
            << log;
  ExpectEndedAsTheirSeedsDecide(sweep, log);
  EXPECT_EQ(Query("SELECT count(*) FROM attempts WHERE stderr_tail LIKE 'lease%'"), 0)
      << QueryText(
             "SELECT group_concat(trial_id || '/' || attempt || ': ' || stderr_tail, '; ') "
             "FROM attempts WHERE stderr_tail LIKE 'lease%'")
      << "\n"
      << log;
  EXPECT_EQ(Query("SELECT sum(failures) FROM trials"), 3) << "the three trainers that failed";
  EXPECT_EQ(Query("SELECT count(*) FROM leases"), 0);
  EXPECT_EQ(QueryText("PRAGMA integrity_check"), "ok");
}

INSTANTIATE_TEST_SUITE_P(ThreeSeeds, RestartAllTest, testing::Values(1, 2, 3),
                         [](const testing::TestParamInfo<int>& info) {
                           return "seed" + std::to_string(info.param);
                         });

}  // namespace
}  // namespace spheret
