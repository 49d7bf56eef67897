#include "client/run_bounded.h"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace spheret::client {
namespace {

// What the child sends: one byte of status code, then the text (or the error message).
void WriteAll(int fd, const std::string& bytes) {
  for (size_t at = 0; at < bytes.size();) {
    const ssize_t wrote = write(fd, bytes.data() + at, bytes.size() - at);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) return;
    at += static_cast<size_t>(wrote);
  }
}

[[noreturn]] void RunChild(int fd, pid_t parent,
                           const std::function<absl::StatusOr<std::string>()>& work) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);   // the CLI killed: its query ends too...
  if (getppid() != parent) _exit(1);  // ...also when that happened before this line
  const absl::StatusOr<std::string> result = work();
  const char code = static_cast<char>(result.status().code());
  WriteAll(fd,
           std::string(1, code) + (result.ok() ? *result : std::string(result.status().message())));
  _exit(0);
}

// Reads `fd` to its end, or until `deadline`; true at the end.
bool ReadUntil(int fd, absl::Time deadline, std::string* bytes) {
  char buffer[1 << 16];
  for (;;) {
    const int64_t left_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left_ms <= 0) return false;
    pollfd ready{fd, POLLIN, 0};
    const int polled = poll(&ready, 1, static_cast<int>(std::min<int64_t>(left_ms, 1000)));
    if (polled < 0 && errno != EINTR) return true;
    if (polled <= 0) continue;
    const ssize_t got = read(fd, buffer, sizeof(buffer));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return true;
    bytes->append(buffer, static_cast<size_t>(got));
  }
}

}  // namespace

absl::StatusOr<std::string> RunBounded(const std::function<absl::StatusOr<std::string>()>& work,
                                       absl::Duration limit) {
  int fds[2];
  if (pipe(fds) != 0) return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  const absl::Time deadline = absl::Now() + limit;
  const pid_t parent = getpid();
  const pid_t child = fork();
  if (child < 0) {
    close(fds[0]);
    close(fds[1]);
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  }
  if (child == 0) {
    close(fds[0]);
    RunChild(fds[1], parent, work);
  }
  close(fds[1]);
  std::string bytes;
  const bool ended = ReadUntil(fds[0], deadline, &bytes);
  close(fds[0]);
  if (!ended) kill(child, SIGKILL);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (!ended) return absl::DeadlineExceededError("the work ran past its limit and was killed");
  if (bytes.empty() || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(
        absl::StrCat("the child ended without an answer (wait status ", status, ")"));
  }
  const auto code = static_cast<absl::StatusCode>(bytes[0]);
  if (code == absl::StatusCode::kOk) return bytes.substr(1);
  return absl::Status(code, bytes.substr(1));
}

}  // namespace spheret::client
