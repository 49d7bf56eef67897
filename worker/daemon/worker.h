// spheret-worker's core: registers with the coordinator, heartbeats, acquires leases while slots
// are free, runs one `spheret-lm train` per local rank for each lease (own process group, the
// torchrun variables for gangs; a later attempt resumes from the newest checkpoint under the shared
// checkpoint root, checkpoint_root/trial-ID/attempt-N/),
// forwards the trainers' JSON-line events through the spool
// (worker/daemon/spool.h), and reports how each attempt ended. A trainer's death never takes the
// worker down.
//
// Exit codes of spheret-lm map to outcomes: 0 SUCCEEDED, 3 DIVERGED, 4 (stopped by SIGTERM after a
// checkpoint) CANCELLED when the coordinator cancelled it or PENDING (handed back) when the worker
// is shutting down, anything else FAILED with the stderr tail.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "worker/daemon/rpc_error_log.h"
#include "worker/daemon/spool.h"
#include "worker/daemon/trainer_process.h"
#include "worker/daemon/worker_metrics.h"
#include "worker/daemon/worker_options.h"

namespace spheret::worker {

class Worker {
 public:
  Worker(WorkerOptions options, WorkerMetrics* metrics);
  ~Worker();
  // Runs until `stop` is raised, then shuts down gracefully: acquires nothing more, stops the
  // trainers (they checkpoint), hands their trials back and flushes the spool (bounded by
  // grace_ms). Returns an error only when it cannot start (bad spool folder, ...).
  absl::Status Run(const std::atomic<bool>& stop);

 private:
  // One leased trial attempt on this worker: its trainer processes and the events not yet sent.
  struct Attempt {
    v1::Lease lease;
    std::vector<std::unique_ptr<TrainerProcess>> ranks;
    bool ships_events = false;  // holds global rank 0, whose stdout carries the events
    v1::EventBatch pending;     // events gathered since the last flush (guarded by mutex_)
    int64_t next_seq = 0;       // stdout line number
    int lines_rejected = 0;     // stdout lines that were not valid events
    size_t pending_bytes = 0;   // about the serialized size of `pending`
    int64_t last_flush_ms = 0;
    bool stopping = false;   // SIGTERM sent
    bool hand_back = false;  // stopped because the worker shuts down
    bool stale = false;      // the coordinator no longer knows this attempt: report nothing
    int64_t kill_at_ms = 0;  // SIGKILL after the grace period
  };

  // Fills a Register or Heartbeat request's lists: the attempts it runs, and those whose Finish
  // waits in the spool.
  void ListAttempts(google::protobuf::RepeatedPtrField<v1::AttemptId>* running,
                    google::protobuf::RepeatedPtrField<v1::AttemptId>* finished);
  void Register();
  void Heartbeat();
  void AcquireWork();
  absl::Status StartAttempt(const v1::Lease& lease);
  void OnTrainerLine(Attempt* attempt, const std::string& line, size_t line_bytes);
  void Supervise();
  void FinishAttempt(Attempt& attempt);
  void FlushEvents(Attempt& attempt, bool force);
  void StopAttempt(Attempt& attempt, bool hand_back);
  int FreeSlots() const;
  void Rejected(const SpoolItem& item, const grpc::Status& status);
  grpc::ClientContext* Prepare(grpc::ClientContext* context, int timeout_ms) const;
  void UpdateMetrics();

  WorkerOptions options_;
  WorkerMetrics* metrics_;
  RealClock real_clock_;  // when options_.clock is nullptr
  const Clock* clock_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::WorkerService::Stub> stub_;
  std::unique_ptr<Spool> spool_;
  RpcErrorLog rpc_errors_;  // Register, Heartbeat and Acquire errors
  std::mutex mutex_;  // guards attempts_ (the stdout readers and the rejection callback touch it)
  std::map<std::pair<int64_t, int>, std::unique_ptr<Attempt>> attempts_;
  const std::string instance_;  // random, per daemon start (RegisterRequest.instance)
  bool registered_ = false;
  int64_t next_register_ms_ = 0;
  bool shutting_down_ = false;
  int heartbeat_interval_ms_ = 5'000;
  int64_t next_heartbeat_ms_ = 0, next_acquire_ms_ = 0;
};

}  // namespace spheret::worker
