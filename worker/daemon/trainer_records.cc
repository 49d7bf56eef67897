#include "worker/daemon/trainer_records.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace spheret::worker {
namespace {

std::string Errno() { return std::strerror(errno); }

// What ending a group needs to know of a process (/proc/PID/stat).
struct ProcessStat {
  pid_t pid = 0;
  char state = '?';  // 'Z' (zombie) and 'X' (dead): exited, waiting to be reaped
  pid_t pgid = 0;
  pid_t session = 0;
  uint64_t start = 0;  // field 22: clock ticks after boot
};

// A trainer's record: "PID START SESSION BOOT".
struct Record {
  pid_t pid = 0;
  uint64_t start = 0;
  pid_t session = 0;
  std::string boot;
};

// Reads /proc/PID/stat; false when there is no such process.
bool ReadStat(pid_t pid, ProcessStat* out) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string text;
  if (!std::getline(in, text)) return false;
  const size_t comm_end = text.rfind(')');  // the command may hold spaces and parentheses
  if (comm_end == std::string::npos) return false;
  std::istringstream fields(text.substr(comm_end + 1));
  std::string skip;
  out->pid = pid;
  fields >> out->state >> skip >> out->pgid >> out->session;  // fields 3 to 6
  for (int field = 7; field <= 21; ++field) fields >> skip;
  fields >> out->start;
  return !fields.fail();
}

std::string BootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  in >> id;
  return id;
}

// The processes of the group `record` led that have not exited: same group id and session,
// started no earlier than its leader.
std::vector<pid_t> LiveMembers(const Record& record) {
  std::vector<pid_t> members;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", error)) {
    pid_t pid = 0;
    ProcessStat stat;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &pid) || !ReadStat(pid, &stat)) {
      continue;
    }
    if (stat.pgid == record.pid && stat.session == record.session && stat.start >= record.start &&
        stat.state != 'Z' && stat.state != 'X') {
      members.push_back(pid);
    }
  }
  return members;
}

// Sends SIGKILL to the group of `record` when it still runs; returns how many processes it had.
// A pid is not given to a new process while a group still has it as its id: when the recorded
// pid is another process now (its start time differs), the recorded group is gone.
size_t EndGroup(const Record& record) {
  ProcessStat leader;
  if (ReadStat(record.pid, &leader) && leader.start != record.start) return 0;
  const std::vector<pid_t> members = LiveMembers(record);
  if (!members.empty()) kill(-record.pid, SIGKILL);
  return members.size();
}

absl::StatusOr<Record> ParseRecord(const std::string& text, const std::string& path) {
  const std::vector<std::string> parts =
      absl::StrSplit(text, absl::ByAnyChar(" \n"), absl::SkipEmpty());
  Record record;
  if (parts.size() != 4 || !absl::SimpleAtoi(parts[0], &record.pid) || record.pid <= 1 ||
      !absl::SimpleAtoi(parts[1], &record.start) || !absl::SimpleAtoi(parts[2], &record.session)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a trainer record ('PID START SESSION BOOT' expected)"));
  }
  record.boot = parts[3];
  return record;
}

// Reads the record `name` of `folder`, never through a link (O_NOFOLLOW) nor past
// kMaxTrainerRecordBytes.
absl::StatusOr<Record> ReadRecord(const Folder& folder, const std::string& name) {
  const std::string path = absl::StrCat(folder.path, "/", name);
  absl::StatusOr<UniqueFd> fd = RegularFileOrRefusal(
      UniqueFd(openat(folder.fd.get(), name.c_str(),
                      O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)),
      path, "open");
  if (!fd.ok()) return fd.status();
  char buffer[kMaxTrainerRecordBytes + 1];
  const ssize_t n = pread(fd->get(), buffer, sizeof(buffer), 0);
  if (n < 0) return absl::InternalError(absl::StrCat("cannot read ", path, ": ", Errno()));
  if (static_cast<size_t>(n) > kMaxTrainerRecordBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": over the limit of ", kMaxTrainerRecordBytes, " bytes of a trainer record"));
  }
  return ParseRecord(std::string(buffer, n), path);
}

// "pid 12 (trial-3-attempt-1-rank0)" for each process of `ended` groups that still runs.
std::vector<std::string> StillRunning(const std::vector<std::pair<std::string, Record>>& ended) {
  std::vector<std::string> running;
  for (const auto& [name, record] : ended) {
    for (pid_t pid : LiveMembers(record))
      running.push_back(absl::StrCat("pid ", pid, " (", name, ")"));
  }
  return running;
}

}  // namespace

absl::StatusOr<UniqueFd> CreateTrainerRecord(const std::string& path) {
  UniqueFd fd(
      open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600));
  return RegularFileOrRefusal(std::move(fd), path, "create");
}

absl::Status WriteTrainerRecord(const UniqueFd& record, const std::string& path, pid_t pid) {
  ProcessStat stat;
  if (!ReadStat(pid, &stat)) {
    return absl::InternalError(absl::StrCat("cannot read /proc/", pid, "/stat for ", path));
  }
  const std::string text =
      absl::StrCat(pid, " ", stat.start, " ", stat.session, " ", BootId(), "\n");
  if (pwrite(record.get(), text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
    return absl::InternalError(absl::StrCat("cannot write ", path, ": ", Errno()));
  }
  return absl::OkStatus();
}

absl::StatusOr<TrainerRecords> TrainerRecords::Claim(const std::string& work_dir) {
  absl::StatusOr<Folder> root = OpenRoot(work_dir);
  if (!root.ok()) return root.status();
  absl::StatusOr<Folder> folder = OpenSubfolder(*root, kTrainersFolder, /*create=*/true);
  if (!folder.ok()) return folder.status();
  if (flock(folder->fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK) {
      return absl::InternalError(absl::StrCat("cannot lock ", folder->path, ": ", Errno()));
    }
    return absl::FailedPreconditionError(
        absl::StrCat("--work-dir ", work_dir, ": another spheret-worker runs on it (it holds ",
                     folder->path, " locked); give each worker its own --work-dir"));
  }
  return TrainerRecords(std::move(*folder));
}

std::vector<std::string> TrainerRecords::Names() const {
  std::vector<std::string> names;
  const int fd = openat(folder_.fd.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR* dir = fd >= 0 ? fdopendir(fd) : nullptr;
  if (dir == nullptr) {
    if (fd >= 0) close(fd);
    return names;
  }
  for (const dirent* entry = readdir(dir); entry != nullptr; entry = readdir(dir)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  closedir(dir);
  return names;
}

absl::StatusOr<std::vector<std::string>> TrainerRecords::EndLeftovers(int wait_ms) {
  std::vector<std::string> lines;
  std::vector<std::pair<std::string, Record>> ended;
  const std::string boot = BootId();
  for (const std::string& name : Names()) {
    absl::StatusOr<Record> record = ReadRecord(folder_, name);
    if (!record.ok()) {
      lines.push_back(absl::StrCat(record.status().message(), "; removed"));
    } else if (record->boot == boot) {  // a record of an earlier boot names no process
      if (const size_t count = EndGroup(*record); count > 0) {
        lines.push_back(absl::StrCat(name, ": ended process group ", record->pid, " (", count,
                                     " process(es)) that an earlier worker left running"));
        ended.emplace_back(name, *record);
      }
    }
    unlinkat(folder_.fd.get(), name.c_str(), 0);  // a link itself, never its target
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  for (std::vector<std::string> running = StillRunning(ended); !running.empty();
       running = StillRunning(ended)) {
    if (std::chrono::steady_clock::now() >= deadline) {
      return absl::FailedPreconditionError(absl::StrCat(
          folder_.path, ": ", absl::StrJoin(running, ", "), " still running ", wait_ms,
          " ms after SIGKILL; the worker starts no trial while an earlier one may hold its slots "
          "(end them, then start it again)"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return lines;
}

}  // namespace spheret::worker
