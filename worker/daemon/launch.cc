#include "worker/daemon/launch.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "protocol/trainer_events.h"
#include "worker/daemon/private_files.h"
#include "worker/daemon/trainer_records.h"

namespace spheret::worker {
namespace {

namespace fs = std::filesystem;

// Hard-links (copies, across file systems) the newest checkpoint of attempts before `attempt`
// into `run_dir`, with its event history: the resumed trainer replays it up to the checkpoint, so
// the curve is whole even when the worker that ran the earlier attempt died with events unsent.
// Checkpoints are replaced by rename, never rewritten in place, so a stale trainer that has not
// noticed it lost the lease cannot overwrite the live one's files; the history is copied, as the
// new trainer appends to it. Returns whether one was found.
absl::StatusOr<bool> TakeOverCheckpoint(const Folder& trial_root, int attempt,
                                        const Folder& run_dir) {
  for (int earlier = attempt - 1; earlier >= 1; --earlier) {
    absl::StatusOr<Folder> folder =
        OpenSubfolder(trial_root, absl::StrCat("attempt-", earlier), /*create=*/false);
    if (absl::IsNotFound(folder.status())) continue;
    if (!folder.ok()) return folder.status();
    const absl::Status linked = LinkOrCopyFile(*folder, run_dir, protocol::kCheckpointFile);
    if (absl::IsNotFound(linked)) continue;
    if (!linked.ok()) return linked;
    const absl::Status copied = CopyFile(*folder, run_dir, protocol::kEventsFile);
    if (!copied.ok() && !absl::IsNotFound(copied)) return copied;
    return true;
  }
  return false;
}

// Opens root/components..., creating each folder that is missing (mode 0700).
absl::StatusOr<Folder> OpenFolderBelow(const std::string& root,
                                       const std::vector<std::string>& components) {
  absl::StatusOr<Folder> folder = OpenRoot(root);
  for (const std::string& name : components) {
    if (!folder.ok()) break;
    folder = OpenSubfolder(*folder, name, /*create=*/true);
  }
  return folder;
}

// records_dir/trial-ID-attempt-N-PROCESS, or "" when the folder keeps no records.
std::string RecordPath(const RunFolder& folder, const v1::Lease& lease,
                       const std::string& process) {
  if (folder.records_dir.empty()) return "";
  return (fs::path(folder.records_dir) /
          absl::StrCat("trial-", lease.trial_id(), "-attempt-", lease.attempt(), "-", process))
      .string();
}

}  // namespace

int FreeLocalPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  socklen_t length = sizeof(address);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  close(fd);
  return port;
}

absl::StatusOr<RunFolder> PrepareRunFolder(const std::string& work_dir,
                                           const std::string& checkpoint_root,
                                           const v1::Lease& lease) {
  if (lease.has_eval()) return PrepareEvalFolder(work_dir, checkpoint_root, lease);
  const std::string name = absl::StrCat("trial-", lease.trial_id());
  absl::StatusOr<Folder> log_dir =
      OpenFolderBelow(work_dir, {"trials", absl::StrCat(name, "-attempt-", lease.attempt())});
  if (!log_dir.ok()) return log_dir.status();
  const absl::Status written =
      WriteNewFile(*log_dir, protocol::kConfigFile, lease.config_json() + "\n");
  if (!written.ok()) return written;
  absl::StatusOr<Folder> trial_root = OpenFolderBelow(checkpoint_root, {name});
  if (!trial_root.ok()) return trial_root.status();
  absl::StatusOr<Folder> run_dir =
      OpenSubfolder(*trial_root, absl::StrCat("attempt-", lease.attempt()), /*create=*/true);
  if (!run_dir.ok()) return run_dir.status();
  absl::StatusOr<bool> resume = TakeOverCheckpoint(*trial_root, lease.attempt(), *run_dir);
  if (!resume.ok()) return resume.status();
  absl::StatusOr<Folder> records = OpenFolderBelow(work_dir, {kTrainersFolder});
  if (!records.ok()) return records.status();
  RunFolder folder;
  folder.records_dir = records->path;
  folder.log_dir = log_dir->path;
  folder.config_path = (fs::path(log_dir->path) / protocol::kConfigFile).string();
  folder.run_dir = run_dir->path;
  folder.resume = *resume;
  return folder;
}

absl::StatusOr<RunFolder> PrepareEvalFolder(const std::string& work_dir,
                                            const std::string& checkpoint_root,
                                            const v1::Lease& lease) {
  absl::StatusOr<Folder> log_dir = OpenFolderBelow(
      work_dir, {"trials", absl::StrCat("trial-", lease.trial_id(), "-attempt-", lease.attempt())});
  if (!log_dir.ok()) return log_dir.status();
  absl::StatusOr<Folder> records = OpenFolderBelow(work_dir, {kTrainersFolder});
  if (!records.ok()) return records.status();
  const std::string scored = absl::StrCat("trial-", lease.eval().trial_id());
  absl::StatusOr<Folder> trial_root = OpenFolderBelow(checkpoint_root, {scored});
  if (!trial_root.ok()) return trial_root.status();
  std::vector<int> attempts;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(trial_root->path, error)) {
    const std::string name = entry.path().filename().string();
    int attempt = 0;
    if (name.rfind("attempt-", 0) == 0 && absl::SimpleAtoi(name.substr(8), &attempt)) {
      attempts.push_back(attempt);
    }
  }
  std::sort(attempts.rbegin(), attempts.rend());
  for (int attempt : attempts) {
    absl::StatusOr<Folder> run_dir =
        OpenSubfolder(*trial_root, absl::StrCat("attempt-", attempt), /*create=*/false);
    if (!run_dir.ok()) return run_dir.status();
    if (!fs::exists(fs::path(run_dir->path) / protocol::kCheckpointFile)) continue;
    RunFolder folder;
    folder.log_dir = log_dir->path;
    folder.run_dir = run_dir->path;
    folder.records_dir = records->path;
    return folder;
  }
  return absl::FailedPreconditionError(
      absl::StrCat("no checkpoint of trial ", lease.eval().trial_id(), " under ", trial_root->path,
                   ": the worker that trained it must share its --checkpoint-root with this one"));
}

ProcessSpec EvalSpec(const LaunchOptions& options, const v1::Lease& lease,
                     const RunFolder& folder) {
  const v1::EvalWork& eval = lease.eval();
  const fs::path data = eval.data();
  ProcessSpec spec;
  spec.argv = {
      options.lm_binary, "eval",
      "--run",           folder.run_dir,
      "--tasks",         absl::StrJoin(eval.tasks(), ","),
      "--data",          (data.is_absolute() ? data : fs::path(options.data_root) / data).string(),
      "--data-root",     options.data_root,
      "--step",          std::to_string(eval.step()),
      "--device",        options.gpu_worker ? "cuda" : "cpu"};
  spec.env["OMP_NUM_THREADS"] =
      std::to_string(options.gpu_worker ? options.threads_per_slot
                                        : lease.slots_size() * options.threads_per_slot);
  if (options.gpu_worker && lease.slots_size() > 0) {
    spec.env["CUDA_VISIBLE_DEVICES"] = std::to_string(lease.slots(0));
  }
  spec.log_path = (fs::path(folder.log_dir) / "eval.log").string();
  spec.record_path = RecordPath(folder, lease, "eval");
  return spec;
}

ProcessSpec RankSpec(const LaunchOptions& options, const v1::Lease& lease, const RunFolder& folder,
                     int local) {
  if (lease.has_eval()) return EvalSpec(options, lease, folder);
  const v1::Rendezvous& rendezvous = lease.rendezvous();
  const int ranks = std::max(rendezvous.ranks_per_node(), 1);
  const int world = std::max(rendezvous.world_size(), 1);
  ProcessSpec spec;
  spec.argv = {options.lm_binary, "train",        "--config",    folder.config_path,
               "--out",           folder.run_dir, "--data-root", options.data_root};
  if (folder.resume) spec.argv.insert(spec.argv.end(), {"--resume", "--replay-events"});
  const int threads =
      options.gpu_worker ? options.threads_per_slot : lease.slots_size() * options.threads_per_slot;
  spec.env["OMP_NUM_THREADS"] = std::to_string(threads);
  if (options.gpu_worker) spec.env["CUDA_VISIBLE_DEVICES"] = absl::StrJoin(lease.slots(), ",");
  if (world > 1) {
    spec.env["WORLD_SIZE"] = std::to_string(world);
    spec.env["RANK"] = std::to_string(rendezvous.node_rank() * ranks + local);
    spec.env["LOCAL_RANK"] = std::to_string(local);
    spec.env["MASTER_ADDR"] = rendezvous.master_addr();
    spec.env["MASTER_PORT"] = std::to_string(rendezvous.master_port());
  }
  spec.log_path =
      (std::filesystem::path(folder.log_dir) / absl::StrCat("rank", local, ".log")).string();
  spec.record_path = RecordPath(folder, lease, absl::StrCat("rank", local));
  return spec;
}

}  // namespace spheret::worker
