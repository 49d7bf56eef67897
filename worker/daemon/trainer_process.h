// One trainer process (a `spheret-lm train` rank) run by the worker: started in its own process
// group, stdout read line by line, the tail of stderr kept for failure reports. Thread-safe.
//
// A trainer dies with the worker: its parent-death signal is SIGKILL (PR_SET_PDEATHSIG, checked
// after fork against a parent that died first). The kernel sends it when the *thread* that
// forked the trainer ends, not the process: call Start from a thread that lives as long as the
// process (spheret-worker starts every trainer from its main thread, in Worker::Run). What the
// trainer starts itself is ended by the next start of the worker (trainer_records.h).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/daemon/private_files.h"

namespace spheret::worker {

struct ProcessSpec {
  std::vector<std::string> argv;           // argv[0] is the program path
  std::map<std::string, std::string> env;  // added to (or replacing in) the worker's environment
  std::string log_path;  // stderr is also appended here, escaped ("" = not kept); not a link
  // Where the process's pid and start time are recorded while it runs, for a later worker to end
  // what a killed one left (trainer_records.h); "" = not recorded; not a link.
  std::string record_path;
};

// The most of one stdout line a TrainerProcess keeps (protocol::kMaxEventLineBytes): the rest of
// a longer line is read and discarded, so a trainer cannot make the worker hold a line of any size.
inline constexpr size_t kMaxStdoutLineBytes = 64 << 10;

class TrainerProcess {
 public:
  // `line`: a stdout line without its newline, cut to its first kMaxStdoutLineBytes bytes;
  // `line_bytes`: its whole length (above line.size() when it was cut).
  using LineCallback = std::function<void(const std::string& line, size_t line_bytes)>;

  // Starts the process; `on_stdout` runs on a reader thread for every stdout line, in order.
  // FailedPrecondition when `spec.log_path` or `spec.record_path` is a symbolic link (it is not
  // followed); Internal when the record cannot be written (the process is killed then).
  static absl::StatusOr<std::unique_ptr<TrainerProcess>> Start(const ProcessSpec& spec,
                                                               LineCallback on_stdout);
  ~TrainerProcess();  // kills the group if still running, joins the readers, removes the record

  pid_t pid() const { return pid_; }
  // Sends `signal` to the whole process group.
  void Signal(int signal);
  // Non-blocking: true once the process exited and its output was read to the end.
  bool Exited();
  // Valid after Exited(): the exit code, or 128 + signal number when killed by a signal.
  int exit_code() const { return exit_code_; }
  bool killed_by_signal() const { return killed_by_signal_; }
  // The last lines of stderr (about 4 KiB), escaped as the log (PrintableLines: the trainer's
  // stderr carries text the submitter chose, and terminal escapes must not reach a screen).
  std::string StderrTail() const;

 private:
  TrainerProcess() = default;
  void ReadStdout(int fd, LineCallback on_stdout);
  void ReadStderr(int fd, UniqueFd log);
  void KeepStderr(const std::string& text, const UniqueFd& log);
  void Reaped();  // once the process is reaped: ends the rest of its group, removes the record

  pid_t pid_ = -1;
  std::string record_path_;
  bool reaped_ = false;
  int exit_code_ = -1;
  bool killed_by_signal_ = false;
  std::thread stdout_reader_, stderr_reader_;
  std::atomic<int> open_streams_{2};
  mutable std::mutex mutex_;
  std::string stderr_tail_;
};

}  // namespace spheret::worker
