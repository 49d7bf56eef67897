#include "worker/daemon/worker_options.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include "worker/daemon/private_files.h"

namespace spheret::worker {

absl::Status ValidateWorkerOptions(WorkerOptions* options) {
  if (options->gpus.empty() && options->cpu_slots <= 0) {
    return absl::InvalidArgumentError("give --gpus 0,1,... or --cpu-slots N (N >= 1)");
  }
  if (!options->gpus.empty() && options->cpu_slots > 0) {
    return absl::InvalidArgumentError("--gpus and --cpu-slots exclude each other");
  }
  if (options->lm_binary.empty() || access(options->lm_binary.c_str(), X_OK) != 0) {
    return absl::InvalidArgumentError("--lm '" + options->lm_binary +
                                      "' is not an executable spheret-lm");
  }
  if (options->worker_id.empty()) {
    char name[256] = {0};
    gethostname(name, sizeof(name) - 1);
    options->worker_id = name;
  }
  if (options->checkpoint_root.empty()) options->checkpoint_root = options->work_dir + "/runs";
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      net::ClientCredentials(options->tls);
  if (!credentials.ok()) return credentials.status();
  options->credentials = *credentials;
  if (options->tls.ca_file.empty() && !net::IsLoopback(options->coordinator)) {
    spdlog::warn(
        "--coordinator {} is not a loopback address and no --tls-ca is given: the "
        "token and the trial data travel unencrypted",
        options->coordinator);
  }
  if (options->threads_per_slot < 1 || options->grace_ms < 0 || options->acquire_interval_ms < 1) {
    return absl::InvalidArgumentError(
        "--threads-per-slot must be >= 1, --grace >= 0 and --acquire-interval >= 1");
  }
  // Trainers run configs and write checkpoints from these: nobody else may plant files in them.
  if (absl::Status made = MakePrivateDir("--work-dir", options->work_dir); !made.ok()) return made;
  return MakePrivateDir("--checkpoint-root", options->checkpoint_root);
}

}  // namespace spheret::worker
