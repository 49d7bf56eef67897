#include "worker/daemon/launch.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "protocol/trainer_events.h"

namespace spheret::worker {
namespace {

namespace fs = std::filesystem;

absl::Status CreateFolder(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return absl::InternalError("cannot create " + dir.string() + ": " + ec.message());
  return absl::OkStatus();
}

// Hard-links (copies, across file systems) the newest checkpoint of attempts before `attempt`
// into `run_dir`, with its event history: the resumed trainer replays it up to the checkpoint, so
// the curve is whole even when the worker that ran the earlier attempt died with events unsent.
// Checkpoints are replaced by rename, never rewritten in place, so a stale trainer that has not
// noticed it lost the lease cannot overwrite the live one's files. Returns whether one was found.
absl::StatusOr<bool> TakeOverCheckpoint(const fs::path& trial_root, int attempt,
                                        const fs::path& run_dir) {
  std::error_code ec;
  for (int earlier = attempt - 1; earlier >= 1; --earlier) {
    const fs::path checkpoint =
        trial_root / absl::StrCat("attempt-", earlier) / protocol::kCheckpointFile;
    if (!fs::exists(checkpoint, ec)) continue;
    const fs::path taken_over = run_dir / protocol::kCheckpointFile;
    fs::remove(taken_over, ec);
    fs::create_hard_link(checkpoint, taken_over, ec);
    if (ec) fs::copy_file(checkpoint, taken_over, ec);
    if (ec) {
      return absl::InternalError("cannot take over " + checkpoint.string() + ": " + ec.message());
    }
    fs::copy_file(checkpoint.parent_path() / protocol::kEventsFile, run_dir / protocol::kEventsFile,
                  fs::copy_options::overwrite_existing, ec);
    return true;
  }
  return false;
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
  const std::string name = absl::StrCat("trial-", lease.trial_id());
  const fs::path log_dir =
      fs::path(work_dir) / "trials" / absl::StrCat(name, "-attempt-", lease.attempt());
  if (absl::Status made = CreateFolder(log_dir); !made.ok()) return made;
  RunFolder folder;
  folder.log_dir = log_dir.string();
  folder.config_path = (log_dir / protocol::kConfigFile).string();
  if (!(std::ofstream(folder.config_path) << lease.config_json() << "\n")) {
    return absl::InternalError("cannot write " + folder.config_path);
  }
  const fs::path trial_root = fs::path(checkpoint_root) / name;
  const fs::path run_dir = trial_root / absl::StrCat("attempt-", lease.attempt());
  if (absl::Status made = CreateFolder(run_dir); !made.ok()) return made;
  folder.run_dir = run_dir.string();
  absl::StatusOr<bool> resume = TakeOverCheckpoint(trial_root, lease.attempt(), run_dir);
  if (!resume.ok()) return resume.status();
  folder.resume = *resume;
  return folder;
}

ProcessSpec RankSpec(const LaunchOptions& options, const v1::Lease& lease, const RunFolder& folder,
                     int local) {
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
  return spec;
}

}  // namespace spheret::worker
