#include "client/render/figures.h"

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "client/render/files.h"

namespace spheret::client {
namespace {

namespace fs = std::filesystem;

// Runs `gnuplot SCRIPT` in the script's folder; its stderr goes to ours.
absl::Status RunGnuplot(const std::string& gnuplot, const fs::path& script) {
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    if (chdir(script.parent_path().c_str()) != 0) _exit(126);
    execlp(gnuplot.c_str(), gnuplot.c_str(), script.filename().c_str(), nullptr);
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
    return absl::FailedPreconditionError("'" + gnuplot +
                                         "' not found: install gnuplot (make deps installs "
                                         "gnuplot-nox) or pass --gnuplot PATH");
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError("gnuplot failed on " + script.string() + " (its message is above)");
  }
  return absl::OkStatus();
}

// Writes the plan's data folder and files, then its script, and draws it.
absl::StatusOr<PlotFiles> Draw(const FigurePlan& plan, const std::string& gnuplot) {
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
  if (absl::Status status = RunGnuplot(gnuplot, plan.script_path); !status.ok()) return status;
  return files;
}

}  // namespace

absl::StatusOr<PlotFiles> WritePlot(const std::vector<CurveInput>& curves,
                                    const PlotOptions& options) {
  const fs::path out = fs::absolute(options.out);
  if (out.extension() != ".png" && out.extension() != ".svg") {
    return absl::InvalidArgumentError("--out " + options.out + ": must end in .png or .svg");
  }
  absl::StatusOr<FigurePlan> plan = PlanPlot(curves, options, out.string());
  if (!plan.ok()) return plan.status();
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
