// The worker daemon's options (its flags), checked and completed once by ValidateWorkerOptions.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "base/clock.h"
#include "net/channel_security.h"

namespace spheret::worker {

struct WorkerOptions {
  std::string coordinator = "127.0.0.1:7070";  // host:port of spheret-coordinator
  std::string token;               // bearer token with the worker role ("" when not required)
  net::ClientTlsOptions tls;       // --tls-ca (verify the coordinator), --tls-cert/--tls-key (mTLS)
  std::string worker_id;           // stable name; default "<hostname>"
  std::string host = "127.0.0.1";  // address gang peers reach this machine at
  std::vector<int> gpus;           // GPU indices; empty for a CPU worker
  int cpu_slots = 0;               // slots of a CPU worker
  int threads_per_slot = 1;        // OMP threads per CPU slot
  std::string lm_binary;           // path of spheret-lm
  // configs, trainer logs and the spool; created mode 0700, refused unless owned by this user
  // and not writable by its group or others
  std::string work_dir = "spheret-worker";
  std::string checkpoint_root;      // run folders (shared across workers; default work_dir/runs),
                                    // checked as work_dir
  std::string data_root = "data";   // passed to spheret-lm --data-root
  int grace_ms = 30'000;            // SIGTERM -> SIGKILL for a cancelled or handed-back trainer
  int acquire_interval_ms = 1'000;  // how often to ask for work while slots stay free (a slot
                                    // that frees asks at once)
  int batch_interval_ms = 250;      // how long events gather before they are sent
  std::string version = "0.1.0";
  const Clock* clock = nullptr;  // intervals and metric wall times; nullptr: the system clock
  // The channel's credentials, made from `tls` by ValidateWorkerOptions.
  std::shared_ptr<grpc::ChannelCredentials> credentials;
};

// Checks and completes the options (defaults that depend on others, the channel credentials);
// InvalidArgument names the flag.
absl::Status ValidateWorkerOptions(WorkerOptions* options);

}  // namespace spheret::worker
