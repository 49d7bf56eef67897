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

int WaitFor(pid_t pid) {
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
  const int status = WaitFor(pid);
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

void FigureBatch::Start() {
  if (queued_.empty()) return;
  Group group;
  group.figures = std::move(queued_);
  queued_.clear();
  const size_t processes =
      std::min<size_t>(group.figures.size(), std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::string> drivers(processes);
  for (size_t i = 0; i < group.figures.size(); ++i) {
    const Queued& figure = group.figures[i];
    absl::StrAppend(&drivers[i % processes], "cd ",
                    Quoted(fs::path(figure.script_path).parent_path().string()), "\n",
                    figure.script, "\nreset\n");
  }
  group.paths.resize(processes);
  group.pids.assign(processes, -1);
  for (size_t k = 0; k < processes && group.written.ok(); ++k) {
    group.written = WriteTemporary(drivers[k], &group.paths[k]);
    if (group.written.ok()) group.pids[k] = StartGnuplot(gnuplot_, "", group.paths[k]);
  }
  started_.push_back(std::move(group));
}

std::vector<int> FigureBatch::Wait(Group& group) {
  std::vector<int> statuses(group.pids.size(), -1);
  for (size_t k = 0; k < group.pids.size(); ++k) {
    if (group.pids[k] > 0) statuses[k] = WaitFor(group.pids[k]);
    if (!group.paths[k].empty()) std::remove(group.paths[k].c_str());
  }
  group.pids.clear();
  group.paths.clear();
  return statuses;
}

absl::Status FigureBatch::Check(const Group& group, const std::vector<int>& statuses) const {
  if (!group.written.ok()) return group.written;
  const size_t processes = statuses.size();
  for (size_t k = 0; k < processes; ++k) {
    if (ExecFailed(statuses[k])) return NotFound(gnuplot_);
    if (statuses[k] != -1 && Succeeded(statuses[k])) continue;
    for (size_t i = k; i < group.figures.size(); i += processes) {  // again, one at a time
      const Queued& figure = group.figures[i];
      absl::Status status = WriteTextFile(figure.script_path, figure.script);
      if (status.ok()) status = RunGnuplot(gnuplot_, figure.script_path);
      if (!status.ok()) return status;
    }
  }
  return absl::OkStatus();
}

absl::Status FigureBatch::Finish() {
  Start();
  std::vector<Group> groups = std::move(started_);
  started_.clear();
  std::vector<std::vector<int>> statuses;
  for (Group& group : groups) statuses.push_back(Wait(group));  // every process, failed or not
  for (size_t g = 0; g < groups.size(); ++g) {
    if (absl::Status status = Check(groups[g], statuses[g]); !status.ok()) return status;
  }
  return absl::OkStatus();
}

FigureBatch::~FigureBatch() {
  for (Group& group : started_) Wait(group);
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
