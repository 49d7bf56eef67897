// The chaos tests' fixture: three workers and a coordinator on loopback, and a seeded driver that
// SIGKILLs workers and restarts them under the same ids (often within the lease TTL), SIGKILLs and
// restarts the coordinator, and SIGSTOPs a worker past its TTL; every trainer starts with a diag
// event whose numbers are not finite. Used by chaos_test.cc (a grid) and chaos_asha_test.cc (an
// ASHA search).
#pragma once

#include <signal.h>

#include <random>

#include "tests/integration/cluster_fixture.h"

namespace spheret::testing_util {

namespace fs = std::filesystem;

constexpr int kDeadlineS = 360;
const char* const kWorkers[] = {"a", "b", "c"};

// The size of one chaos run. Each suite runs one small seed in the default suite (the same
// faults and assertions on a shorter sweep: every kind of fault still lands on running trials)
// and three seeds at full size, labelled slow (make test-all).
struct ChaosSize {
  int seed;
  int seeds;    // seeds per method (the sweeps have two methods)
  int steps;    // training steps of a trial
  int chaos_s;  // how long the grid's and the ASHA search's driver strikes
  int strikes;  // how many kills (huge lines) or stalls (coordinator stall) there are
  int ttl_s;    // the coordinator's lease TTL
};
inline constexpr ChaosSize kFull[] = {
    {1, 10, 300, 40, 0, 4}, {2, 10, 300, 40, 0, 4}, {3, 10, 300, 40, 0, 4}};

// "1, 2, ..., n": the `seeds:` of a sweep.
inline std::string SeedList(int n) {
  std::string list;
  for (int i = 1; i <= n; ++i) list += (i > 1 ? ", " : "") + std::to_string(i);
  return list;
}

inline std::string SeedName(const testing::TestParamInfo<ChaosSize>& info) {
  return "seed" + std::to_string(info.param.seed);
}

class ChaosTest : public ClusterTest, public testing::WithParamInterface<ChaosSize> {
 protected:
  void SetUp() override {
    lease_ttl_s_ = GetParam().ttl_s;
    retry_backoff_s_ = "0.5";  // many failures by design: keep their back-off short
    ClusterTest::SetUp();
    // Every trainer first prints a diag event with null (non-finite) numbers, then is the real one.
    nan_lm_ = (dir_ / "nan-diag-lm.sh").string();
    std::ofstream(nan_lm_)
        << "#!/bin/sh\n"
           "echo '{\"type\":\"diag\",\"step\":0,\"layer\":1,\"sublayer\":\"attn\","
           "\"hidden_norm\":null,\"theta\":null,\"alpha\":null,\"radial\":null}'\n"
           "exec "
        << Env("SPHERET_LM") << " \"$@\"\n";
    fs::permissions(nan_lm_, fs::perms::owner_all);
  }

  void Start(const std::string& worker) { StartWorker(worker, 1, "", nan_lm_); }

  void RestartCoordinator() {
    coordinator_->Signal(SIGKILL);
    StartCoordinator("127.0.0.1:" + std::to_string(port_));
  }

  // One chaos step chosen by `rng`; returns what it did, for the log.
  std::string Strike(std::mt19937& rng) {
    const std::string worker = kWorkers[rng() % 3];
    const int dice = static_cast<int>(rng() % 100);
    if (dice < 45) {  // a worker dies; systemd brings it back under the same id, often in the TTL
      workers_[worker]->Signal(SIGKILL);
      std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 2'000));
      Start(worker);
      return "SIGKILL worker " + worker + ", restarted";
    }
    if (dice < 60 && coordinator_restarts_ < 3) {
      ++coordinator_restarts_;
      RestartCoordinator();
      return "SIGKILL coordinator, restarted";
    }
    if (dice < 70 && !stopped_once_) {  // frozen past its TTL: its leases go elsewhere
      stopped_once_ = true;
      workers_[worker]->Send(SIGSTOP);
      std::this_thread::sleep_for(std::chrono::milliseconds(lease_ttl_s_ * 1'000 + 1'500));
      workers_[worker]->Send(SIGCONT);
      return "SIGSTOP worker " + worker + " past its TTL, then SIGCONT";
    }
    return "nothing";
  }

  // SIGKILLs the worker that holds the lease of a trial whose trainer has stored a training step,
  // waiting up to `wait_s` for one, and restarts it under its id: the random strikes can all miss
  // a short sweep on a fast, idle machine (its trials done before the first one lands). Returns
  // the log line, or "" when no trial ran in time.
  std::string StrikeARunningTrial(int wait_s) {
    const auto until = Clock::now() + std::chrono::seconds(wait_s);
    while (Clock::now() < until) {
      const std::string worker = QueryText(
          "SELECT l.worker_id FROM leases l WHERE EXISTS (SELECT 1 FROM curves c WHERE "
          "c.trial_id = l.trial_id AND c.metric = 'train/loss') ORDER BY l.trial_id LIMIT 1");
      if (workers_.count(worker) > 0) {
        workers_[worker]->Signal(SIGKILL);
        Start(worker);
        return "SIGKILL worker " + worker + " (running a trial), restarted";
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return "";
  }

  // Each trial of `sweep` ended as its trainer decided (its last attempt's own end event says
  // done or diverged); a SUCCEEDED one with its whole curve of `steps` steps.
  void ExpectEndedAsTheirTrainersDecided(int64_t sweep, int steps) {
    for (const v1::Trial& trial : Trials(sweep)) {
      const std::string id = std::to_string(trial.trial_id());
      // As its trainer decided: the last attempt's own end event says so.
      const std::string ended = Query(
                                    "SELECT count(*) FROM events e JOIN trials t USING (trial_id) "
                                    "WHERE e.trial_id = " +
                                    id +
                                    " AND e.attempt = t.attempt AND "
                                    "e.json LIKE '%\"type\":\"done\"%'") > 0
                                    ? "done"
                                    : "diverged";
      EXPECT_EQ(trial.state() == v1::TRIAL_STATE_SUCCEEDED ? "done" : "diverged", ended)
          << "trial " << id;
      if (trial.state() == v1::TRIAL_STATE_SUCCEEDED) {
        ExpectCompleteCurve(trial.trial_id(), steps);
      }
    }
  }

  std::string nan_lm_;
  int coordinator_restarts_ = 0;
  bool stopped_once_ = false;
};

}  // namespace spheret::testing_util
