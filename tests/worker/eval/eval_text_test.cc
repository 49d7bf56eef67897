// The parts of zero-shot scoring that re-state Python: random.Random and the bootstrap (str
// methods and the harness's text clean-ups: tests/worker/text/python_text_test.cc). Expected values
// are Python 3.11's own (printed by the interpreter when the test was written);
// tests/worker/lm/lm_eval_parity_test.py checks the whole path against lm-evaluation-harness
// itself.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "config/train_config.h"
#include "worker/eval/metrics.h"
#include "worker/eval/tasks.h"

namespace spheret::eval {
namespace {

TEST(PythonRandomTest, MatchesRandomRandom) {
  // random.Random(0).random(), random.Random(1).random(), random.Random(99).random()
  EXPECT_EQ(PythonRandom(0).Random(), 0.8444218515250481);
  EXPECT_EQ(PythonRandom(1).Random(), 0.13436424411240122);
  PythonRandom r(99);
  EXPECT_EQ(r.Random(), 0.40397807494366633);
}

TEST(MetricsTest, TiesGoToTheFirstChoiceAndStdErrorIsBessels) {
  const TaskSpec& boolq = *(*FindTasks({"boolq"}))[0];
  std::vector<TaskDoc> docs(3);
  std::vector<std::vector<Answer>> answers;
  for (int d = 0; d < 3; ++d) {
    docs[d].gold = d == 2 ? 1 : 0;
    docs[d].choice_lengths = {2, 3};
    answers.push_back({{-1.0, false}, {-1.0, false}});  // a tie: argmax takes choice 0
  }
  const std::vector<MetricValue> scores = ScoreTask(boolq, docs, answers);
  ASSERT_EQ(scores.size(), 1u);
  EXPECT_DOUBLE_EQ(scores[0].value, 2.0 / 3);
  EXPECT_DOUBLE_EQ(scores[0].std_error, std::sqrt((2 * (1.0 / 9) + 4.0 / 9) / 2) / std::sqrt(3));
}

TEST(TasksTest, TheConfigKnowsTheTasksTheEvaluatorDefines) {
  EXPECT_EQ(AllTaskNames(), ZeroShotTaskNames());
  EXPECT_FALSE(FindTasks({"hellaswag,nope"}).ok());
}

// Issue 28, item 2: a task file's bad field of 6 MB is echoed as at most 80 bytes and its size
// (the whole field went into the error event before, a 6 MB line that wedged the worker's spool).
TEST(TasksTest, HostileInputHugeBadFieldsAreEchoedCut) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("spheret_tasks_test_" + std::to_string(getpid()));
  const TaskSpec& arc = *FindTasks({"arc_easy"}).value()[0];
  std::filesystem::create_directories(
      std::filesystem::path(TaskFile(arc, dir.string())).parent_path());
  for (const std::string& doc :
       {R"({"question":[")" + std::string(6'000'000, 'q') + "\"]}",
        R"({"question":"q","choices":{"text":["a","b"],"label":["A","B"]},"answerKey":")" +
            std::string(6'000'000, 'k') + "\"}"}) {
    std::ofstream(TaskFile(arc, dir.string())) << doc << "\n";
    std::vector<TaskDoc> docs;
    const absl::Status status = LoadTaskDocs(arc, dir.string(), &docs);
    EXPECT_FALSE(status.ok());
    EXPECT_LT(status.message().size(), 1'000u) << status.message().substr(0, 2'000);
    EXPECT_NE(status.message().find(" bytes)"), std::string::npos) << status.message();
  }
  std::filesystem::remove_all(dir);
}

// Issue 28, item 12: a task file line with invalid UTF-8 or a lone surrogate said "not a JSON
// object"; it names the byte and the reason, with the file and line.
TEST(TasksTest, HostileInputBadTextInATaskFileIsNamed) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("spheret_tasks_utf8_" + std::to_string(getpid()));
  const TaskSpec& arc = *FindTasks({"arc_easy"}).value()[0];
  const std::string file = TaskFile(arc, dir.string());
  std::filesystem::create_directories(std::filesystem::path(file).parent_path());
  const std::string good =
      R"({"question":"q","choices":{"text":["a","b"],"label":["A","B"]},"answerKey":"A"})";
  const std::pair<std::string, std::string> cases[] = {
      {R"({"question":"q)"
       "\xC3\x28"
       R"("})",
       " line 2: invalid UTF-8 at byte 15"},
      {R"({"question":"\ud800"})", " line 2: a lone surrogate escape"},
      {R"(["not", "an", "object"])", " line 2: not a JSON object"},
  };
  for (const auto& [bad, expected] : cases) {
    std::ofstream(file) << good << "\n" << bad << "\n";
    std::vector<TaskDoc> docs;
    const absl::Status status = LoadTaskDocs(arc, dir.string(), &docs);
    EXPECT_EQ(status.message().rfind(file + expected, 0), 0u) << status.message();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace spheret::eval
