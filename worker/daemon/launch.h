// How one attempt of a trial lives on a worker's disk and how its trainer ranks are started:
//   work_dir/trials/trial-ID-attempt-N/        the config file and each rank's stderr log
//   work_dir/trainers/trial-ID-attempt-N-rankR each rank's pid while it runs (trainer_records.h)
//   checkpoint_root/trial-ID/attempt-N/        the run folder (checkpoint, event history)
// A later attempt takes over the newest checkpoint (and event history) an earlier one left.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "spheret/v1/workers.pb.h"
#include "worker/daemon/trainer_process.h"

namespace spheret::worker {

// Where an attempt's files are, once PrepareRunFolder made them.
struct RunFolder {
  std::string log_dir;      // the config file and rank logs
  std::string config_path;  // the lease's config, as spheret-lm --config reads it
  std::string run_dir;      // spheret-lm --out
  bool resume = false;      // a checkpoint of an earlier attempt was taken over
  std::string records_dir;  // work_dir/trainers: each rank's record while it runs ("" = none)
};

// Creates the attempt's folders (mode 0700), writes its config (a new file) and takes over the
// newest earlier checkpoint; for an evaluation job (lease.eval set), PrepareEvalFolder's. Every
// folder and file below `work_dir` and `checkpoint_root` is opened without following symbolic
// links: FailedPrecondition names a planted link (or a folder another user owns or may write),
// Internal the path the disk refused.
absl::StatusOr<RunFolder> PrepareRunFolder(const std::string& work_dir,
                                           const std::string& checkpoint_root,
                                           const v1::Lease& lease);

// An evaluation job's attempt (lease.eval set): the log folder as for a trial, and as run_dir the
// folder of the scored trial's newest attempt that holds a checkpoint,
// checkpoint_root/trial-ID/attempt-N/ (read, never written). FailedPrecondition when no attempt
// of that trial has one here: the checkpoint root is not shared with the worker that trained it.
absl::StatusOr<RunFolder> PrepareEvalFolder(const std::string& work_dir,
                                            const std::string& checkpoint_root,
                                            const v1::Lease& lease);

// What the ranks of an attempt need beyond the lease and its folder.
struct LaunchOptions {
  std::string lm_binary;     // spheret-lm
  std::string data_root;     // spheret-lm --data-root
  bool gpu_worker = false;   // slots are GPU indices (CUDA_VISIBLE_DEVICES)
  int threads_per_slot = 1;  // OMP threads per CPU slot (per rank on a GPU worker)
};

// The process of local rank `local` of this node: spheret-lm train's argv and the torchrun
// variables (WORLD_SIZE, RANK, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) for gangs; for an
// evaluation job (one process), EvalSpec's.
ProcessSpec RankSpec(const LaunchOptions& options, const v1::Lease& lease, const RunFolder& folder,
                     int local);

// The one process of an evaluation job: `spheret-lm eval` of the scored run's checkpoint of the
// lease's step (refusing another) on its tasks, the data folder under data_root when relative, on
// the first of its GPUs (or its CPU slots' threads).
ProcessSpec EvalSpec(const LaunchOptions& options, const v1::Lease& lease, const RunFolder& folder);

// A TCP port the OS considers free right now (0 when none could be had): the MASTER_PORT offered
// at Acquire, used if this worker becomes rank 0 of a gang.
int FreeLocalPort();

}  // namespace spheret::worker
