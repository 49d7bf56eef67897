// What the coordinator's collaborators share (server/coordinator.h): the store, the metrics, the
// clock and the options, and behind one lock the scheduler and each sweep's change counter. Each
// collaborator holds a pointer to it; its lock also guards the collaborators' own state (their
// *Locked members run with it held).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>

#include "base/clock.h"
#include "server/coordinator_types.h"
#include "server/metrics/metrics.h"
#include "server/sched/scheduler.h"
#include "server/store/store.h"

namespace spheret {

struct CoordinatorState {
  // `store`, `metrics` and `clock` must outlive it.
  CoordinatorState(store::Store* store, metrics::CoordinatorMetrics* metrics, const Clock* clock,
                   CoordinatorOptions options)
      : store(store),
        metrics(metrics),
        clock(clock),
        options(options),
        scheduler(options.scheduler) {}

  // Bumps the change counter of `sweep_id` and wakes WaitForChange; takes the lock.
  void Touch(int64_t sweep_id);
  // Blocks until the change counter of `sweep_id` passes `seen` or `timeout_ms` elapses, and
  // returns it.
  int64_t WaitForChange(int64_t sweep_id, int64_t seen, int64_t timeout_ms);

  store::Store* const store;
  metrics::CoordinatorMetrics* const metrics;
  const Clock* const clock;
  const CoordinatorOptions options;

  std::mutex mutex;  // guards what follows and the collaborators' *Locked state
  sched::Scheduler scheduler;
  std::map<int64_t, int64_t> versions;  // per sweep: grows whenever one of its trials changes
  std::condition_variable changed;      // notified when a version grows
};

}  // namespace spheret
