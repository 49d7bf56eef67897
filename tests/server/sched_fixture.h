// The fixture of sched_test.cc and sched_gang_test.cc: a scheduler on a fake clock.

#pragma once

#include <gtest/gtest.h>

#include "base/clock.h"
#include "server/sched/scheduler.h"

namespace spheret::sched {

inline constexpr int64_t kTtl = 30'000;

class SchedulerTest : public testing::Test {
 protected:
  SchedulerTest() : scheduler_(Options()) {}
  static SchedulerOptions Options() {
    SchedulerOptions options;
    options.lease_ttl_ms = kTtl;
    options.aging_ms_per_point = 60'000;
    options.backoff_base_ms = 5'000;
    options.backoff_max_ms = 60'000;
    return options;
  }

  // A sweep of `count` trials with ids first_trial.. and the given shape.
  void AddSweep(int64_t sweep_id, int count, int priority = 50, int nodes = 1, int slots = 1,
                int gpus = 0, int max_restarts = 2, int64_t first_trial = 0) {
    SweepRecord sweep;
    sweep.sweep_id = sweep_id;
    sweep.name = "s" + std::to_string(sweep_id);
    sweep.priority = priority;
    sweep.nodes = nodes;
    sweep.slots_per_node = slots;
    sweep.gpus = gpus;
    sweep.max_restarts = max_restarts;
    sweep.submitted_ms = clock_.NowMs();
    scheduler_.AddSweep(sweep);
    if (first_trial == 0) first_trial = sweep_id * 1000;
    for (int i = 0; i < count; ++i) {
      TrialRecord trial;
      trial.trial_id = first_trial + i;
      trial.sweep_id = sweep_id;
      trial.config_json = "{}";
      trial.priority = priority;
      scheduler_.AddTrial(trial);
    }
  }

  void AddWorker(const std::string& id, int cpu_slots, std::vector<int> gpus = {}) {
    WorkerRecord worker;
    worker.worker_id = id;
    worker.host = id + ".local";
    worker.cpu_slots = cpu_slots;
    worker.gpus = std::move(gpus);
    Changes changes;
    ASSERT_TRUE(scheduler_.Register(worker, {}, clock_.NowMs(), &changes).ok());
  }

  std::vector<LeaseRecord> Acquire(const std::string& worker, int free = 8, int max = 1) {
    Changes changes;
    absl::StatusOr<std::vector<LeaseRecord>> leases =
        scheduler_.Acquire(worker, "", free, 29500, max, clock_.NowMs(), &changes);
    EXPECT_TRUE(leases.ok()) << leases.status();
    return leases.ok() ? *leases : std::vector<LeaseRecord>{};
  }

  TrialState StateOf(int64_t trial_id, TrialState if_gone) const {
    const TrialRecord* trial = scheduler_.FindTrial(trial_id);
    return trial == nullptr ? if_gone : trial->state;
  }

  FakeClock clock_;
  Scheduler scheduler_;
};

}  // namespace spheret::sched
