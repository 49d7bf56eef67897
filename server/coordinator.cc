#include "server/coordinator.h"

#include <chrono>
#include <utility>

#include "base/status_macros.h"

namespace spheret {

Coordinator::Coordinator(store::Store* store, metrics::CoordinatorMetrics* metrics,
                         const Clock* clock, CoordinatorOptions options)
    : state_(store, metrics, clock, options), tokens_(store, clock), reads_(store) {}

absl::StatusOr<std::unique_ptr<Coordinator>> Coordinator::Start(
    store::Store* store, metrics::CoordinatorMetrics* metrics, const Clock* clock,
    CoordinatorOptions options) {
  std::unique_ptr<Coordinator> coordinator(new Coordinator(store, metrics, clock, options));
  SPHERET_RETURN_IF_ERROR(coordinator->decisions_.Restore());
  store->OnCommit([metrics](double seconds) { metrics->ObserveCommit(seconds); });
  coordinator->housekeeping_ = std::thread([c = coordinator.get()] { c->Loop(); });
  return coordinator;
}

Coordinator::~Coordinator() {
  {
    std::lock_guard<std::mutex> lock(stop_mutex_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (housekeeping_.joinable()) housekeeping_.join();
  state_.store->OnCommit(nullptr);
}

void Coordinator::Housekeeping() {
  leases_.Housekeeping();
  searches_.ConfirmDue();
}

void Coordinator::Loop() {
  std::unique_lock<std::mutex> lock(stop_mutex_);
  while (!stopping_) {
    lock.unlock();
    Housekeeping();
    lock.lock();
    stop_cv_.wait_for(lock, std::chrono::milliseconds(state_.options.housekeeping_interval_ms),
                      [this] { return stopping_; });
  }
}

// The calls, each handed to the collaborator whose job it is.

absl::StatusOr<SubmitResult> Coordinator::Submit(const std::string& spec_yaml,
                                                 const std::string& idempotency_key, bool dry_run,
                                                 const Interrupt& interrupt,
                                                 const ConnectionFiles& files) {
  return submissions_.Submit(spec_yaml, idempotency_key, dry_run, interrupt, files);
}

absl::StatusOr<sched::CancelResult> Coordinator::CancelSweep(int64_t sweep_id) {
  return submissions_.CancelSweep(sweep_id);
}

absl::StatusOr<sched::CancelResult> Coordinator::CancelTrial(int64_t trial_id) {
  return submissions_.CancelTrial(trial_id);
}

absl::StatusOr<std::vector<EvalPlan>> Coordinator::Evaluate(const EvalRequest& request) {
  return evaluations_.Evaluate(request);
}

absl::StatusOr<std::vector<sched::AttemptId>> Coordinator::Register(
    const WorkerRecord& worker, const std::vector<sched::AttemptId>& running,
    const std::vector<sched::AttemptId>& finished) {
  return leases_.Register(worker, running, finished);
}

absl::StatusOr<sched::HeartbeatResult> Coordinator::Heartbeat(
    const std::string& worker_id, const std::string& instance,
    const std::vector<sched::AttemptId>& running, const std::vector<sched::AttemptId>& finished) {
  return leases_.Heartbeat(worker_id, instance, running, finished);
}

absl::StatusOr<TrialRecord> Coordinator::Resume(int64_t trial_id) {
  return searches_.Resume(trial_id);
}

void Coordinator::ConfirmDue() { searches_.ConfirmDue(); }

absl::StatusOr<std::vector<Lease>> Coordinator::Acquire(const std::string& worker_id,
                                                        const std::string& instance, int free_slots,
                                                        int rendezvous_port, int max_trials,
                                                        const Interrupt& gone) {
  return leases_.Acquire(worker_id, instance, free_slots, rendezvous_port, max_trials, gone);
}

absl::StatusOr<int64_t> Coordinator::Ingest(const EventBatchRecord& batch,
                                            const std::string& worker_id) {
  return intake_.Ingest(batch, worker_id);
}

absl::StatusOr<TrialState> Coordinator::Finish(const AttemptEnd& end,
                                               const std::string& worker_id) {
  return leases_.Finish(end, worker_id);
}

int64_t Coordinator::WaitForChange(int64_t sweep_id, int64_t seen, int64_t timeout_ms) {
  return state_.WaitForChange(sweep_id, seen, timeout_ms);
}

absl::StatusOr<SweepView> Coordinator::GetSweep(int64_t sweep_id) {
  return reads_.GetSweep(sweep_id);
}

absl::StatusOr<std::vector<SweepView>> Coordinator::ListSweeps(int64_t after_sweep_id, int limit) {
  return reads_.ListSweeps(after_sweep_id, limit);
}

absl::StatusOr<std::vector<TrialView>> Coordinator::ListTrials(const store::TrialQuery& query) {
  return reads_.ListTrials(query);
}

absl::StatusOr<TrialLogs> Coordinator::GetTrialLogs(int64_t trial_id) {
  return reads_.GetTrialLogs(trial_id);
}

absl::StatusOr<EventPage> Coordinator::TrialEvents(int64_t trial_id, const EventPageQuery& query) {
  return reads_.TrialEvents(trial_id, query);
}

absl::StatusOr<std::vector<TrialResult>> Coordinator::ListResults(const store::TrialQuery& query) {
  return reads_.ListResults(query);
}

absl::Status Coordinator::ForEachCurve(
    int64_t sweep_id, const std::string& metric, int64_t max_points,
    const std::function<absl::Status(const TrialRecord&, const CurveRecord&, int64_t)>& visit) {
  return reads_.ForEachCurve(sweep_id, metric, max_points, visit);
}

absl::Status Coordinator::ForEachLayerSeries(
    int64_t sweep_id, const LayerValueQuery& query,
    const std::function<absl::Status(const TrialRecord&, const std::vector<LayerSeries>&)>& visit) {
  return reads_.ForEachLayerSeries(sweep_id, query, visit);
}

std::unique_ptr<SweepWatch> Coordinator::Watch(int64_t sweep_id) { return reads_.Watch(sweep_id); }

}  // namespace spheret
