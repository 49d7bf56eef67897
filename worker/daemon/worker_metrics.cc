#include "worker/daemon/worker_metrics.h"

namespace spheret::worker {
namespace {

prometheus::Family<prometheus::Gauge>& Gauges(prometheus::Registry& registry, const char* name,
                                              const char* help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(registry);
}

}  // namespace

WorkerMetrics::WorkerMetrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      slots_(Gauges(*registry_, "spheret_worker_slots", "Slots of this worker by state.")),
      slots_busy_(slots_.Add({{"state", "busy"}})),
      slots_free_(slots_.Add({{"state", "free"}})),
      processes_(Gauges(*registry_, "spheret_worker_trainer_processes",
                        "spheret-lm processes running under this worker.")
                     .Add({})),
      events_forwarded_(prometheus::BuildCounter()
                            .Name("spheret_worker_events_forwarded_total")
                            .Help("Trainer events handed to the coordinator (or its spool).")
                            .Register(*registry_)
                            .Add({})),
      spool_depth_(Gauges(*registry_, "spheret_worker_spool_depth",
                          "Batches and attempt ends waiting to reach the coordinator.")
                       .Add({})),
      lines_rejected_(
          prometheus::BuildCounter()
              .Name("spheret_worker_trainer_lines_rejected_total")
              .Help("Trainer stdout lines that were not valid events (logged, dropped).")
              .Register(*registry_)
              .Add({})) {}

void WorkerMetrics::SetSlots(int busy, int free) {
  slots_busy_.Set(busy);
  slots_free_.Set(free);
}
void WorkerMetrics::SetTrainerProcesses(int count) { processes_.Set(count); }
void WorkerMetrics::AddEventsForwarded(int64_t count) { events_forwarded_.Increment(count); }
void WorkerMetrics::SetSpoolDepth(int64_t items) { spool_depth_.Set(items); }
void WorkerMetrics::AddLinesRejected(int64_t count) { lines_rejected_.Increment(count); }

}  // namespace spheret::worker
