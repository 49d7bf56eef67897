// spheret-worker's core: registers with the coordinator, heartbeats, acquires leases while slots
// are free, runs one `spheret-lm train` per local rank for each lease (own process group, the
// torchrun variables for gangs; a later attempt resumes from the newest checkpoint under the shared
// checkpoint root, checkpoint_root/trial-ID/attempt-N/),
// forwards the trainers' JSON-line events through the spooling Outbox, and reports how each
// attempt ended. A trainer's death never takes the worker down.
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
#include "net/channel_security.h"
#include "worker/agent/outbox.h"
#include "worker/agent/trainer_process.h"
#include "worker/agent/worker_metrics.h"

namespace spheret::agent {

struct AgentOptions {
  std::string coordinator = "127.0.0.1:7070";  // host:port of spheret-coordinator
  std::string token;               // bearer token with the worker role ("" when not required)
  net::ClientTlsOptions tls;       // --tls-ca (verify the coordinator), --tls-cert/--tls-key (mTLS)
  std::string worker_id;           // stable name; default "<hostname>"
  std::string host = "127.0.0.1";  // address gang peers reach this machine at
  std::vector<int> gpus;           // GPU indices; empty for a CPU worker
  int cpu_slots = 0;               // slots of a CPU worker
  int threads_per_slot = 1;        // OMP threads per CPU slot
  std::string lm_binary;           // path of spheret-lm
  std::string work_dir = "spheret-worker";  // configs, trainer logs and the spool
  std::string checkpoint_root;      // run folders (shared across workers); default work_dir/runs
  std::string data_root = "data";   // passed to spheret-lm --data-root
  int grace_ms = 30'000;            // SIGTERM -> SIGKILL for a cancelled or handed-back trainer
  int acquire_interval_ms = 1'000;  // how often to ask for work while slots are free
  int batch_interval_ms = 250;      // how long events gather before they are sent
  std::string version = "0.1.0";
  // The channel's credentials, made from `tls` by ValidateAgentOptions.
  std::shared_ptr<grpc::ChannelCredentials> credentials;
};

// Checks and completes the options (defaults that depend on others, the channel credentials);
// InvalidArgument names the flag.
absl::Status ValidateAgentOptions(AgentOptions* options);

class Agent {
 public:
  Agent(AgentOptions options, WorkerMetrics* metrics);
  ~Agent();
  // Runs until `stop` is raised, then shuts down gracefully: acquires nothing more, stops the
  // trainers (they checkpoint), hands their trials back and flushes the outbox (bounded by
  // grace_ms). Returns an error only when it cannot start (bad spool folder, ...).
  absl::Status Run(const std::atomic<bool>& stop);

 private:
  struct Attempt;
  void Register();
  void Heartbeat();
  void AcquireWork();
  absl::Status StartAttempt(const v1::Lease& lease);
  void OnTrainerLine(Attempt* attempt, const std::string& line);
  void Supervise();
  void FinishAttempt(Attempt& attempt);
  void FlushEvents(Attempt& attempt, bool force);
  void StopAttempt(Attempt& attempt, bool hand_back);
  int FreeSlots() const;
  std::vector<int> FreeSlotIndices(int count) const;
  void Rejected(const OutboxItem& item, const grpc::Status& status);
  grpc::ClientContext* Prepare(grpc::ClientContext* context, int timeout_ms) const;
  void UpdateMetrics();

  AgentOptions options_;
  WorkerMetrics* metrics_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::WorkerService::Stub> stub_;
  std::unique_ptr<Outbox> outbox_;
  std::mutex mutex_;  // guards attempts_ (the stdout readers and the rejection callback touch it)
  std::map<std::pair<int64_t, int>, std::unique_ptr<Attempt>> attempts_;
  const std::string instance_;  // random, per daemon start (RegisterRequest.instance)
  bool registered_ = false;
  int64_t next_register_ms_ = 0;
  bool shutting_down_ = false;
  int heartbeat_interval_ms_ = 5'000;
  int64_t next_heartbeat_ms_ = 0, next_acquire_ms_ = 0;
};

}  // namespace spheret::agent
