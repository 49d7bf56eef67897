#include "worker/daemon/trainer_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/printable.h"
#include "worker/daemon/trainer_records.h"

extern char** environ;

namespace spheret::worker {
namespace {

constexpr size_t kTailBytes = 4096;

// The worker's environment with `overrides` applied, as "K=V" strings.
std::vector<std::string> Environment(const std::map<std::string, std::string>& overrides) {
  std::map<std::string, std::string> merged;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string text = *entry;
    const size_t eq = text.find('=');
    if (eq != std::string::npos) merged[text.substr(0, eq)] = text.substr(eq + 1);
  }
  for (const auto& [key, value] : overrides) merged[key] = value;
  std::vector<std::string> env;
  for (const auto& [key, value] : merged) env.push_back(key + "=" + value);
  return env;
}

// The child's side of fork: only async-signal-safe calls (nothing allocates) up to execve.
[[noreturn]] void ExecTrainer(pid_t parent, int out, int err, char* const argv[],
                              char* const envp[]) {
  setpgid(0, 0);  // its own group: signals reach every process it starts
  // SIGKILL when the thread that forked it ends (the worker's main thread: when the worker dies).
  // A worker that died before this call is no longer the parent: nobody would read or end it.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(127);
  // Ignored signals stay ignored across exec: give the trainer the defaults back (with SIGPIPE
  // ignored, a trainer orphaned by a dead worker would train on with nobody reading it).
  signal(SIGPIPE, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  signal(SIGINT, SIG_DFL);
  dup2(out, STDOUT_FILENO);
  dup2(err, STDERR_FILENO);
  execve(argv[0], argv, envp);
  const char message[] = "spheret-worker: cannot execute the trainer\n";
  (void)!write(STDERR_FILENO, message, sizeof(message) - 1);
  _exit(127);
}

}  // namespace

absl::StatusOr<std::unique_ptr<TrainerProcess>> TrainerProcess::Start(const ProcessSpec& spec,
                                                                      LineCallback on_stdout) {
  if (spec.argv.empty()) return absl::InvalidArgumentError("no program to run");
  UniqueFd log, record;
  if (!spec.log_path.empty()) {
    absl::StatusOr<UniqueFd> opened = OpenForAppend(spec.log_path);
    if (!opened.ok()) return opened.status();
    log = std::move(*opened);
  }
  if (!spec.record_path.empty()) {
    absl::StatusOr<UniqueFd> created = CreateTrainerRecord(spec.record_path);
    if (!created.ok()) return created.status();
    record = std::move(*created);
  }
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
    if (record.get() >= 0) unlink(spec.record_path.c_str());
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  // Everything the child needs is built before fork (no allocation after it).
  std::vector<std::string> env_strings = Environment(spec.env);
  std::vector<char*> argv, envp;
  for (const std::string& arg : spec.argv) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  for (std::string& entry : env_strings) envp.push_back(entry.data());
  envp.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    if (record.get() >= 0) unlink(spec.record_path.c_str());
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  }
  if (pid == 0) ExecTrainer(parent, out[1], err[1], argv.data(), envp.data());
  setpgid(pid, pid);  // also here, so that Signal works even before the child ran
  close(out[1]);
  close(err[1]);
  std::unique_ptr<TrainerProcess> process(new TrainerProcess());
  process->pid_ = pid;
  process->record_path_ = spec.record_path;
  process->stdout_reader_ =
      std::thread(&TrainerProcess::ReadStdout, process.get(), out[0], std::move(on_stdout));
  process->stderr_reader_ =
      std::thread(&TrainerProcess::ReadStderr, process.get(), err[0], std::move(log));
  if (record.get() >= 0) {
    // On failure, destroying `process` kills it, joins the readers and removes the record.
    const absl::Status written = WriteTrainerRecord(record, spec.record_path, pid);
    if (!written.ok()) return written;
  }
  return process;
}

TrainerProcess::~TrainerProcess() {
  if (!reaped_ && pid_ > 0) {
    kill(-pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    Reaped();
  }
  if (stdout_reader_.joinable()) stdout_reader_.join();
  if (stderr_reader_.joinable()) stderr_reader_.join();
}

void TrainerProcess::Signal(int signal) {
  if (!reaped_ && pid_ > 0) kill(-pid_, signal);
}

bool TrainerProcess::Exited() {
  if (!reaped_) {
    int status = 0;
    const pid_t done = waitpid(pid_, &status, WNOHANG);
    if (done != pid_) return false;
    reaped_ = true;
    killed_by_signal_ = WIFSIGNALED(status);
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    Reaped();
  }
  if (open_streams_.load() > 0) return false;
  if (stdout_reader_.joinable()) stdout_reader_.join();
  if (stderr_reader_.joinable()) stderr_reader_.join();
  return true;
}

void TrainerProcess::Reaped() {
  // A process the trainer started may still hold the pipes: end the whole group.
  kill(-pid_, SIGKILL);
  if (!record_path_.empty()) unlink(record_path_.c_str());
}

std::string TrainerProcess::StderrTail() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stderr_tail_;
}

void TrainerProcess::ReadStdout(int fd, LineCallback on_stdout) {
  std::string line;       // the current line's first kMaxStdoutLineBytes bytes
  size_t line_bytes = 0;  // the current line's length so far
  char buffer[65536];
  for (ssize_t n; (n = read(fd, buffer, sizeof(buffer))) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (const char *at = buffer, *end = buffer + n; at < end;) {
      const char* newline = static_cast<const char*>(std::memchr(at, '\n', end - at));
      const size_t piece = (newline != nullptr ? newline : end) - at;
      line.append(at, std::min(piece, kMaxStdoutLineBytes - line.size()));
      line_bytes += piece;
      at += piece;
      if (newline == nullptr) break;
      on_stdout(line, line_bytes);
      line.clear();
      line_bytes = 0;
      ++at;
    }
  }
  if (line_bytes > 0) on_stdout(line, line_bytes);
  close(fd);
  --open_streams_;
}

// Whole lines are escaped (an escape sequence is never cut in two); a line longer than the tail
// goes out in pieces.
void TrainerProcess::ReadStderr(int fd, UniqueFd log) {
  std::string pending;
  char buffer[8192];
  for (ssize_t n; (n = read(fd, buffer, sizeof(buffer))) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    pending.append(buffer, n);
    const size_t end = pending.rfind('\n');
    if (end == std::string::npos && pending.size() < kTailBytes) continue;
    const size_t cut = end == std::string::npos ? pending.size() : end + 1;
    KeepStderr(PrintableLines(std::string_view(pending).substr(0, cut)), log);
    pending.erase(0, cut);
  }
  if (!pending.empty()) KeepStderr(PrintableLines(pending), log);
  close(fd);
  std::lock_guard<std::mutex> lock(mutex_);
  if (stderr_tail_.size() > kTailBytes) stderr_tail_.erase(0, stderr_tail_.size() - kTailBytes);
  --open_streams_;
}

void TrainerProcess::KeepStderr(const std::string& text, const UniqueFd& log) {
  for (std::string_view rest = text; log.get() >= 0 && !rest.empty();) {
    const ssize_t n = write(log.get(), rest.data(), rest.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;  // a full disk costs the log, not the trial
    rest.remove_prefix(n);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  stderr_tail_ += text;
  if (stderr_tail_.size() > 2 * kTailBytes) stderr_tail_.erase(0, stderr_tail_.size() - kTailBytes);
}

}  // namespace spheret::worker
