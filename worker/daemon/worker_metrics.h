// The worker's Prometheus families: slots busy/free, trainer processes, events forwarded, trainer
// lines rejected, spool depth. Thread-safe.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <memory>

namespace spheret::worker {

class WorkerMetrics {
 public:
  WorkerMetrics();
  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }
  void SetSlots(int busy, int free);
  void SetTrainerProcesses(int count);
  void AddEventsForwarded(int64_t count);
  void SetSpoolDepth(int64_t items);
  void AddLinesRejected(int64_t count);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Gauge>& slots_;
  prometheus::Gauge& slots_busy_;
  prometheus::Gauge& slots_free_;
  prometheus::Gauge& processes_;
  prometheus::Counter& events_forwarded_;
  prometheus::Gauge& spool_depth_;
  prometheus::Counter& lines_rejected_;
};

}  // namespace spheret::worker
