// Zero-shot evaluation end to end: a sweep with `eval:` trains tiny models on a real worker, the
// worker's trainer evaluates each final checkpoint (same lease, same slot), the scores land in
// SQLite through eval events, and `spheret results` / `spheret report` show the zero-shot table.
// A sweep whose eval cannot run still succeeds with its training results, the failure stored.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/integration/child_process.h"
#include "tests/integration/cluster_fixture.h"

namespace spheret {
namespace {

namespace fs = std::filesystem;
using testing_util::Base;
using testing_util::ClusterTest;
using testing_util::Env;

class ZeroShotTest : public ClusterTest {
 protected:
  // DATA/zs: 20 PIQA and 20 LAMBADA documents in their datasets' JSONL shape.
  void WriteTasks() {
    fs::create_directories(dir_ / "data" / "zs" / "piqa");
    fs::create_directories(dir_ / "data" / "zs" / "lambada_openai");
    std::ofstream piqa(dir_ / "data" / "zs" / "piqa" / "validation.jsonl");
    std::ofstream lambada(dir_ / "data" / "zs" / "lambada_openai" / "test.jsonl");
    for (int i = 0; i < 20; ++i) {
      piqa << R"({"goal": "how do you open line )" << i << R"(?", "sol1": "the quick brown fox", )"
           << R"("sol2": "jumps over )" << i << R"(", "label": )" << i % 2 << "}\n";
      lambada << R"({"text": "line )" << i << R"(: the quick brown fox jumps"})"
              << "\n";
    }
  }

  // Runs the CLI against the coordinator; its stdout.
  std::string Cli(const std::vector<std::string>& args, int* code) {
    std::vector<std::string> argv = {Env("SPHERET_CLI"), "--coordinator",
                                     "127.0.0.1:" + std::to_string(port_), "--timeout", "20"};
    argv.insert(argv.end(), args.begin(), args.end());
    testing_util::ChildProcess run(argv, (dir_ / "cli.out").string(), (dir_ / "cli.err").string());
    *code = run.Wait();
    std::ifstream in(dir_ / "cli.out");
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
};

TEST_F(ZeroShotTest, SweepWithEvalStoresScoresAndReportsTheZeroShotTable) {
  WriteTasks();
  StartWorker("a", 1);
  const int64_t sweep = Submit("name: zs\ndataset: tiny\nbase: " + Base(20, 10) +
                               "\neval: {tasks: [piqa, lambada_openai], data: zs}\n"
                               "parameters:\n  method: {values: [pre_ln, geonorm]}\n");
  ASSERT_TRUE(WaitFor(sweep, 240, [](auto& t) { return All(t, v1::TRIAL_STATE_SUCCEEDED); }))
      << Log("a");
  for (const v1::Trial& trial : Trials(sweep)) {
    const std::string id = std::to_string(trial.trial_id());
    EXPECT_EQ(Query("SELECT count(*) FROM evals WHERE ckpt_step = 20 AND trial_id = " + id), 4)
        << "piqa acc, acc_norm; lambada perplexity, acc: " << Log("a");
    EXPECT_EQ(Query("SELECT count(*) FROM evals WHERE value IS NULL AND trial_id = " + id), 0);
  }
  int code = 0;
  const std::string table =
      Cli({"results", std::to_string(sweep), "--metric", "zeroshot/piqa/acc", "--metric",
           "zeroshot/lambada_openai/perplexity", "--format", "csv"},
          &code);
  ASSERT_EQ(code, 0) << Log("cli");
  // The CSV's mean of pre_ln's piqa acc is the stored value, in percent.
  const double stored = std::stod(QueryText(
      "SELECT e.value FROM evals e JOIN trials t USING (trial_id) WHERE e.task = 'piqa' AND "
      "e.metric = 'acc' AND t.config_json LIKE '%\"method\":\"pre_ln\"%'"));
  std::istringstream lines(table);
  std::string line;
  bool found = false;
  while (std::getline(lines, line)) {
    if (line.rfind("pre_ln,", 0) == 0 && line.find("zeroshot/piqa/acc,") != std::string::npos) {
      std::vector<std::string> cells;
      std::stringstream fields(line);
      for (std::string cell; std::getline(fields, cell, ',');) cells.push_back(cell);
      EXPECT_NEAR(std::stod(cells.at(5)), 100 * stored, 1e-9) << line;
      found = true;
    }
  }
  EXPECT_TRUE(found) << table;
  std::printf("spheret results (csv):\n%s", table.c_str());
  Cli({"report", std::to_string(sweep), "--out", (dir_ / "report").string()}, &code);
  ASSERT_EQ(code, 0) << Log("cli");
  std::ifstream zeroshot(dir_ / "report" / "zeroshot.md");
  std::stringstream markdown;
  markdown << zeroshot.rdbuf();
  std::printf("report zeroshot.md:\n%s\n", markdown.str().c_str());
  EXPECT_NE(markdown.str().find("piqa acc %"), std::string::npos) << markdown.str();
  EXPECT_NE(markdown.str().find("lambada_openai perplexity"), std::string::npos) << markdown.str();
  EXPECT_NE(markdown.str().find("geonorm"), std::string::npos) << markdown.str();
}

TEST_F(ZeroShotTest, FailedEvalKeepsTheTrainingResultsAndSaysWhy) {
  StartWorker("a", 1);
  const int64_t sweep = Submit("name: zs-missing\ndataset: tiny\nbase: " + Base(10, 5) +
                               "\neval: {tasks: [hellaswag], data: zs}\n"
                               "parameters:\n  method: {values: [pre_ln]}\n");
  ASSERT_TRUE(WaitFor(sweep, 120, [](auto& t) { return All(t, v1::TRIAL_STATE_SUCCEEDED); }))
      << Log("a");
  const std::string id = std::to_string(Trials(sweep)[0].trial_id());
  EXPECT_EQ(Query("SELECT count(*) FROM curves WHERE metric = 'val/loss' AND trial_id = " + id), 3);
  EXPECT_NE(QueryText("SELECT error FROM evals WHERE metric = 'error' AND trial_id = " + id)
                .find("no data for task hellaswag"),
            std::string::npos);
  int code = 0;
  Cli({"results", std::to_string(sweep)}, &code);
  EXPECT_EQ(code, 0);
  EXPECT_NE(Log("cli").find("zero-shot eval failed at step 10"), std::string::npos) << Log("cli");
}

}  // namespace
}  // namespace spheret
