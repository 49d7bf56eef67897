// Test helper: a child process started with fork/exec, stdout and stderr to files, killed with
// real signals. Used by the coordinator crash test and the worker integration and fault tests.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace spheret::testing_util {

class ChildProcess {
 public:
  // Starts argv[0] with `argv`; stdout goes to `stdout_path`, stderr to `stderr_path`.
  ChildProcess(const std::vector<std::string>& argv, const std::string& stdout_path,
               const std::string& stderr_path)
      : stdout_path_(stdout_path) {
    std::vector<char*> args;
    for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // no orphans when a test process dies
      const int out = open(stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int err = open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      dup2(out, STDOUT_FILENO);
      dup2(err, STDERR_FILENO);
      execv(args[0], args.data());
      _exit(127);
    }
  }
  ~ChildProcess() { Signal(SIGKILL); }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // The first stdout line (waits up to `timeout_ms` for it), or "".
  std::string FirstLine(int timeout_ms = 20'000) const {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < deadline) {
      std::ifstream in(stdout_path_);
      std::string line;
      if (std::getline(in, line) && in) return line;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return "";
  }
  // Sends `signal` without waiting.
  void Send(int signal) const {
    if (pid_ > 0) kill(pid_, signal);
  }
  // Sends `signal` and reaps the process; returns its wait status (0 when already gone).
  int Signal(int signal) {
    if (pid_ <= 0) return 0;
    kill(pid_, signal);
    return Wait();
  }
  // Waits for the process to end; returns its wait status.
  int Wait() {
    if (pid_ <= 0) return 0;
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = 0;
    return status;
  }

 private:
  pid_t pid_ = 0;
  std::string stdout_path_;
};

}  // namespace spheret::testing_util
