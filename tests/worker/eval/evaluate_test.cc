// What `spheret-lm eval` accepts before it scores (worker/eval/evaluate.h): the task folder stays
// under --data-root when one is given (the worker gives one, with a folder a submitter named).
#include "worker/eval/evaluate.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "worker/eval/tasks.h"

namespace spheret::eval {
namespace {

namespace fs = std::filesystem;

// Issue 44, item 10: `spheret eval --data ../../../../etc` (or /etc) reached the worker's
// spheret-lm as a folder outside its --data-root, and its files were read.
TEST(EvaluateTest, HostileInputATaskFolderOutsideTheDataRootIsRefusedNamingBoth) {
  const fs::path dir = fs::temp_directory_path() / ("spheret_evaluate_" + std::to_string(getpid()));
  const TaskSpec& piqa = *FindTasks({"piqa"}).value()[0];
  fs::create_directories(fs::path(TaskFile(piqa, (dir / "outside").string())).parent_path());
  std::ofstream(TaskFile(piqa, (dir / "outside").string()))
      << R"({"goal": "g", "sol1": "a", "sol2": "b", "label": 0})"
      << "\n";
  fs::create_directories(dir / "root");
  EvalOptions options;
  options.tasks = {"piqa"};
  options.scorer.run_dir = (dir / "root" / "no-run").string();
  options.scorer.data_root = (dir / "root").string();
  for (const std::string& data : std::vector<std::string>{
           (dir / "root" / ".." / "outside").string(), (dir / "outside").string(), "/etc",
           (dir / "root" / ".." / ".." / ".." / ".." / "etc").string()}) {
    options.data_dir = data;
    int64_t step = 0;
    std::vector<TaskResult> results;
    const absl::Status status = Evaluate(options, &step, &results);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << data << ": " << status;
    EXPECT_NE(status.message().find("--data " + data + " is outside --data-root " +
                                    options.scorer.data_root),
              std::string::npos)
        << status;
  }
  options.data_dir = (dir / "root" / "zs").string();  // inside: it gets as far as the task files
  int64_t step = 0;
  std::vector<TaskResult> results;
  EXPECT_NE(Evaluate(options, &step, &results).message().find("no data for task piqa"),
            std::string::npos);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace spheret::eval
