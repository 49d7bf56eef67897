// What a worker killed with SIGKILL leaves running, and how its next start ends it.
//
// A trainer the worker starts (a `spheret-lm train` rank or `eval`, leader of its own process
// group) dies with the worker (PR_SET_PDEATHSIG, trainer_process.h), but what the trainer starts
// itself does not, nor does a trainer of a worker binary without that. So each trainer is also
// recorded, while it runs, as a file WORK_DIR/trainers/NAME (mode 0600, never through a symbolic
// link) holding "PID START SESSION BOOT": START is field 22 of /proc/PID/stat (clock ticks after
// boot, which tells a reused pid apart), SESSION its session id, BOOT the kernel's boot id. The
// record is removed once the trainer is reaped. A starting worker claims the folder (an exclusive
// lock: two live workers never share a work dir) and, before it registers, ends the process group
// of every record that still runs.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/daemon/private_files.h"

namespace spheret::worker {

// The folder of the records, in the work dir.
inline constexpr char kTrainersFolder[] = "trainers";
// The most bytes of a record that are read: a longer file is not a record.
inline constexpr size_t kMaxTrainerRecordBytes = 256;
// How long EndLeftovers waits for the groups it sent SIGKILL to be gone.
inline constexpr int kLeftoverWaitMs = 10'000;

// Opens `path` to hold a trainer's record (created mode 0600, emptied, close-on-exec), before the
// trainer starts. FailedPrecondition when `path` is a symbolic link or not a regular file.
absl::StatusOr<UniqueFd> CreateTrainerRecord(const std::string& path);

// Writes the record of process `pid` (the leader of its own group, just started by this process)
// to `record`, opened at `path` by CreateTrainerRecord. Internal names `path` when /proc or the
// disk refused.
absl::Status WriteTrainerRecord(const UniqueFd& record, const std::string& path, pid_t pid);

// The records of a work dir, claimed by this process for the life of the object.
class TrainerRecords {
 public:
  // Opens WORK_DIR/trainers (made mode 0700 when missing; a link or a folder others may write is
  // refused) and locks it (flock; the lock goes with this object or the process, never to a
  // trainer). FailedPrecondition names `work_dir` when another live process holds it: another
  // worker runs on this --work-dir.
  static absl::StatusOr<TrainerRecords> Claim(const std::string& work_dir);

  // Ends what an earlier worker on this work dir left: for each record, SIGKILL to its process
  // group when the group still runs (the recorded leader, same start time, or, the leader gone,
  // any process of its group and session started since), then waits up to `wait_ms` for them to
  // be gone. Every record is removed (a link there is removed, never followed). Returns a line
  // for each group it ended, for the log; FailedPrecondition names those still running after
  // `wait_ms` (the worker must not start their trials again while they hold the slots).
  absl::StatusOr<std::vector<std::string>> EndLeftovers(int wait_ms = kLeftoverWaitMs);

  const std::string& path() const { return folder_.path; }

 private:
  explicit TrainerRecords(Folder folder) : folder_(std::move(folder)) {}
  std::vector<std::string> Names() const;

  Folder folder_;
};

}  // namespace spheret::worker
