#include "client/render/figures.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "client/render/files.h"

namespace spheret::client {
namespace {

namespace fs = std::filesystem;

constexpr int kExecFailed = 127;

// Starts `gnuplot SCRIPT` in `folder` (ours when empty); its stderr goes to ours. -1 when fork
// fails.
pid_t StartGnuplot(const std::string& gnuplot, const fs::path& folder, const std::string& script) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (!folder.empty() && chdir(folder.c_str()) != 0) _exit(126);
    execlp(gnuplot.c_str(), gnuplot.c_str(), script.c_str(), nullptr);
    _exit(kExecFailed);
  }
  return pid;
}

int Wait(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

bool ExecFailed(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == kExecFailed; }
bool Succeeded(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

absl::Status NotFound(const std::string& gnuplot) {
  return absl::FailedPreconditionError("'" + gnuplot +
                                       "' not found: install gnuplot (make deps installs "
                                       "gnuplot-nox) or pass --gnuplot PATH");
}

// Runs `gnuplot SCRIPT` in the script's folder.
absl::Status RunGnuplot(const std::string& gnuplot, const fs::path& script) {
  const pid_t pid = StartGnuplot(gnuplot, script.parent_path(), script.filename().string());
  if (pid < 0) return absl::InternalError("fork failed");
  const int status = Wait(pid);
  if (ExecFailed(status)) return NotFound(gnuplot);
  if (!Succeeded(status)) {
    return absl::InternalError("gnuplot failed on " + script.string() + " (its message is above)");
  }
  return absl::OkStatus();
}

// Writes the plan's data folder and files, then its script.
absl::StatusOr<PlotFiles> WriteFiles(const FigurePlan& plan) {
  std::error_code error;
  fs::create_directories(plan.data_dir, error);
  if (error) {
    return absl::UnavailableError("cannot create " + plan.data_dir + ": " + error.message());
  }
  PlotFiles files;
  files.figure = plan.figure;
  for (const auto& [path, text] : plan.data) {
    if (absl::Status status = WriteTextFile(path, text); !status.ok()) return status;
    files.data_files.push_back(path);
  }
  if (absl::Status status = WriteTextFile(plan.script_path, plan.script); !status.ok()) {
    return status;
  }
  files.script = plan.script_path;
  files.lines = plan.lines;
  return files;
}

// Writes the plan's files and draws it.
absl::StatusOr<PlotFiles> Draw(const FigurePlan& plan, const std::string& gnuplot) {
  absl::StatusOr<PlotFiles> files = WriteFiles(plan);
  if (!files.ok()) return files.status();
  if (absl::Status status = RunGnuplot(gnuplot, plan.script_path); !status.ok()) return status;
  return files;
}

std::string Quoted(const std::string& text) {  // a gnuplot single-quoted string
  return "'" + absl::StrReplaceAll(text, {{"'", "''"}}) + "'";
}

// A temporary file holding `text`, its path in *path.
absl::Status WriteTemporary(const std::string& text, std::string* path) {
  *path = (fs::temp_directory_path() / "spheret-figures-XXXXXX").string();
  const int fd = mkstemp(path->data());
  if (fd < 0) return absl::UnavailableError("cannot create a temporary file in " + *path);
  close(fd);
  return WriteTextFile(*path, text);
}

}  // namespace

absl::StatusOr<PlotFiles> FigureBatch::Add(const FigurePlan& plan) {
  absl::StatusOr<PlotFiles> files = WriteFiles(plan);
  if (!files.ok()) return files.status();
  queued_.push_back({plan.script_path, plan.script});
  return files;
}

absl::Status FigureBatch::Finish() {
  const std::vector<Queued> queued = std::move(queued_);
  queued_.clear();
  if (queued.empty()) return absl::OkStatus();
  const size_t processes =
      std::min<size_t>(queued.size(), std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::string> drivers(processes);  // process k draws figures k, k + processes, ...
  for (size_t i = 0; i < queued.size(); ++i) {
    absl::StrAppend(&drivers[i % processes], "cd ",
                    Quoted(fs::path(queued[i].script_path).parent_path().string()), "\n",
                    queued[i].script, "\nreset\n");
  }
  std::vector<std::string> paths(processes);
  std::vector<pid_t> pids(processes, -1);
  absl::Status written = absl::OkStatus();
  for (size_t k = 0; k < processes && written.ok(); ++k) {
    written = WriteTemporary(drivers[k], &paths[k]);
    if (written.ok()) pids[k] = StartGnuplot(gnuplot_, "", paths[k]);
  }
  std::vector<int> statuses(processes, -1);
  for (size_t k = 0; k < processes; ++k) {
    if (pids[k] > 0) statuses[k] = Wait(pids[k]);
    if (!paths[k].empty()) std::remove(paths[k].c_str());
  }
  if (!written.ok()) return written;
  for (size_t k = 0; k < processes; ++k) {
    if (ExecFailed(statuses[k])) return NotFound(gnuplot_);
    if (pids[k] > 0 && Succeeded(statuses[k])) continue;
    for (size_t i = k; i < queued.size(); i += processes) {  // again, one at a time
      absl::Status status = WriteTextFile(queued[i].script_path, queued[i].script);
      if (status.ok()) status = RunGnuplot(gnuplot_, queued[i].script_path);
      if (!status.ok()) return status;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<PlotFiles> WritePlot(const std::vector<CurveInput>& curves,
                                    const PlotOptions& options, FigureBatch* batch) {
  const fs::path out = fs::absolute(options.out);
  if (out.extension() != ".png" && out.extension() != ".svg") {
    return absl::InvalidArgumentError("--out " + options.out + ": must end in .png or .svg");
  }
  absl::StatusOr<FigurePlan> plan = PlanPlot(curves, options, out.string());
  if (!plan.ok()) return plan.status();
  if (batch != nullptr) return batch->Add(*plan);
  return Draw(*plan, options.gnuplot);
}

absl::StatusOr<PlotFiles> WriteRungPlot(const std::vector<CurveInput>& curves,
                                        const std::vector<int64_t>& rung_steps,
                                        const PlotOptions& options) {
  absl::StatusOr<FigurePlan> plan =
      PlanRungPlot(curves, rung_steps, options, fs::absolute(options.out).string());
  if (!plan.ok()) return plan.status();
  return Draw(*plan, options.gnuplot);
}

}  // namespace spheret::client
