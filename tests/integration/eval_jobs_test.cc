// `spheret eval` end to end: a sweep trains without zero-shot tasks on a real worker, then
// `spheret eval` schedules jobs that score the finished trials' checkpoints on a worker, leased
// like trials. Each trial is scored once per task (asking again schedules nothing), a worker
// killed mid-evaluation loses nothing and duplicates nothing (the job is retried on another), and
// the stored scores equal `spheret-lm eval` on the same checkpoint.
#include <gtest/gtest.h>

#include <csignal>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "tests/integration/child_process.h"
#include "tests/integration/cluster_fixture.h"

namespace spheret {
namespace {

namespace fs = std::filesystem;
using testing_util::Base;
using testing_util::ClusterTest;
using testing_util::Env;

// A lease TTL of 3 s and a retry back-off of 0.5 s: the killed worker's job is retried once its
// lease lapses.
class EvalJobsTest : public ClusterTest {
 protected:
  void SetUp() override {
    lease_ttl_s_ = 3;
    retry_backoff_s_ = "0.5";
    ClusterTest::SetUp();
  }

  // DATA/<folder>: `piqa` PIQA and 20 LAMBADA documents in their datasets' JSONL shape.
  void WriteTasks(const std::string& folder, int piqa) {
    fs::create_directories(dir_ / "data" / folder / "piqa");
    fs::create_directories(dir_ / "data" / folder / "lambada_openai");
    std::ofstream piqa_file(dir_ / "data" / folder / "piqa" / "validation.jsonl");
    for (int i = 0; i < piqa; ++i) {
      piqa_file << R"({"goal": "how do you open line )" << i
                << R"( of the fox's door?", "sol1": "the quick brown fox", "sol2": "jumps over )"
                << i << R"( lazy dogs", "label": )" << (i % 3 == 0 ? 1 : 0) << "}\n";
    }
    std::ofstream lambada(dir_ / "data" / folder / "lambada_openai" / "test.jsonl");
    for (int i = 0; i < 20; ++i)
      lambada << R"({"text": "line )" << i << R"(: the fox jumps"})"
              << "\n";
  }

  // Runs the CLI against the coordinator; its stdout (its stderr in Log("cli")).
  std::string Cli(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {Env("SPHERET_CLI"), "--coordinator",
                                     "127.0.0.1:" + std::to_string(port_), "--timeout", "20"};
    argv.insert(argv.end(), args.begin(), args.end());
    testing_util::ChildProcess run(argv, (dir_ / "cli.out").string(), (dir_ / "cli.err").string());
    EXPECT_EQ(run.Wait(), 0) << Log("cli");
    return Read(dir_ / "cli.out");
  }

  static std::string Read(const fs::path& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  // task/metric -> value of `spheret-lm eval` on trial `id`'s first attempt's checkpoint.
  std::map<std::string, double> LmEval(int64_t id, const std::string& tasks,
                                       const std::string& folder, int step) {
    testing_util::ChildProcess eval(
        {Env("SPHERET_LM"), "eval", "--run",
         (dir_ / "runs" / ("trial-" + std::to_string(id)) / "attempt-1").string(), "--tasks", tasks,
         "--data", (dir_ / "data" / folder).string(), "--data-root", (dir_ / "data").string(),
         "--step", std::to_string(step)},
        (dir_ / "lm_eval.out").string(), (dir_ / "lm_eval.err").string());
    EXPECT_EQ(eval.Wait(), 0) << Read(dir_ / "lm_eval.err");
    std::map<std::string, double> values;
    std::istringstream lines(Read(dir_ / "lm_eval.out"));
    const std::regex event(R"re("metric":"([a-z_]+)".*"task":"([a-z_]+)".*"value":([-0-9.e+]+))re");
    std::smatch match;
    for (std::string line; std::getline(lines, line);) {
      if (std::regex_search(line, match, event)) {
        values[match[2].str() + "/" + match[1].str()] = std::stod(match[3].str());
      }
    }
    return values;
  }

  // Every stored score of trial `id` equals spheret-lm eval's.
  void ExpectScoresEqualLmEval(int64_t id, const std::string& tasks, const std::string& folder) {
    const std::map<std::string, double> expected = LmEval(id, tasks, folder, 20);
    ASSERT_FALSE(expected.empty()) << Read(dir_ / "lm_eval.err");
    const std::string trial = std::to_string(id);
    EXPECT_EQ(Query("SELECT count(*) FROM evals WHERE trial_id = " + trial),
              static_cast<int64_t>(expected.size()));
    for (const auto& [key, value] : expected) {
      const size_t slash = key.find('/');
      const std::string stored = QueryText(
          "SELECT printf('%.17g', value) FROM evals WHERE ckpt_step = 20 AND trial_id = " + trial +
          " AND task = '" + key.substr(0, slash) + "' AND metric = '" + key.substr(slash + 1) +
          "'");
      ASSERT_FALSE(stored.empty()) << key;
      EXPECT_NEAR(std::stod(stored), value, 1e-12 * std::max(1.0, std::abs(value))) << key;
    }
  }

  int64_t TrainTwo() {
    const int64_t sweep = Submit("name: ev\ndataset: tiny\nbase: " + Base(20, 10) +
                                 "\nparameters:\n  method: {values: [pre_ln, geonorm]}\n");
    EXPECT_TRUE(WaitFor(sweep, 240, [](auto& t) { return All(t, v1::TRIAL_STATE_SUCCEEDED); }))
        << Log("a");
    return sweep;
  }
};

TEST_F(EvalJobsTest, EvalScoresEachFinishedTrialOnceAsTheTrainerWould) {
  WriteTasks("zs", 20);
  StartWorker("a", 1);
  const int64_t sweep = TrainTwo();
  const std::vector<v1::Trial> trained = Trials(sweep);
  ASSERT_EQ(trained.size(), 2u);
  const std::string id = std::to_string(sweep);
  std::string out = Cli(
      {"eval", id, "--tasks", "piqa,lambada_openai", "--data", "zs", "--where", "method=geonorm"});
  std::printf("spheret eval:\n%s", out.c_str());
  EXPECT_NE(out.find("1 evaluation job(s) scheduled"), std::string::npos) << out;
  ASSERT_TRUE(WaitFor(sweep, 240, [](auto& t) {
    return t.size() == 3 && All(t, v1::TRIAL_STATE_SUCCEEDED);
  })) << Log("a");
  EXPECT_EQ(Query("SELECT eval_of FROM trials WHERE trial_id = 3"), trained[1].trial_id());
  EXPECT_EQ(
      Query("SELECT count(*) FROM evals WHERE trial_id = " + std::to_string(trained[0].trial_id())),
      0)
      << "pre_ln was not asked for";
  ExpectScoresEqualLmEval(trained[1].trial_id(), "piqa,lambada_openai", "zs");

  out = Cli({"eval", id, "--tasks", "piqa,lambada_openai", "--data", "zs"});  // both trials
  std::printf("spheret eval, again and for both:\n%s", out.c_str());
  EXPECT_NE(out.find("already scored at step 20"), std::string::npos) << out;
  ASSERT_TRUE(WaitFor(sweep, 240, [](auto& t) {
    return t.size() == 4 && All(t, v1::TRIAL_STATE_SUCCEEDED);
  })) << Log("a");
  out = Cli({"eval", id, "--tasks", "piqa,lambada_openai", "--data", "zs"});
  EXPECT_NE(out.find("0 evaluation job(s) scheduled"), std::string::npos) << out;
  EXPECT_EQ(Trials(sweep).size(), 4u) << "asking again schedules nothing";
  ExpectScoresEqualLmEval(trained[0].trial_id(), "piqa,lambada_openai", "zs");
  out = Cli({"trials", "--sweep", id});
  std::printf("spheret trials:\n%s", out.c_str());
  EXPECT_NE(out.find("#" + std::to_string(trained[1].trial_id()) + " at step 20"),
            std::string::npos)
      << out;
}

TEST_F(EvalJobsTest, AWorkerKilledMidEvaluationLosesAndDuplicatesNothing) {
  // 1,500 PIQA documents (3,000 requests): seconds of scoring, long enough to be killed in the
  // middle, and scored twice more (by worker b and by the reference spheret-lm eval).
  WriteTasks("zs", 1500);
  StartWorker("a", 1);
  const int64_t sweep = TrainTwo();
  const int64_t trial = Trials(sweep)[0].trial_id();
  Cli({"eval", std::to_string(sweep), "--tasks", "piqa,lambada_openai", "--data", "zs", "--trials",
       std::to_string(trial)});
  // Killed once its spheret-lm eval has planned its requests and scores them (seconds).
  const fs::path log = dir_ / "a" / "trials" / "trial-3-attempt-1" / "eval.log";
  for (int i = 0; i < 3000 && Read(log).find("requests from") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_NE(Read(log).find("requests from"), std::string::npos) << Log("a");
  workers_["a"]->Signal(SIGKILL);  // its spheret-lm eval dies writing to the closed pipe
  StartWorker("b", 1);
  ASSERT_TRUE(WaitFor(sweep, 240, [](auto& t) {
    return t.size() == 3 && All(t, v1::TRIAL_STATE_SUCCEEDED);
  })) << Log("b");
  EXPECT_EQ(QueryText("SELECT outcome FROM attempts WHERE trial_id = 3 AND attempt = 1"), "FAILED")
      << "the first attempt was killed before it reported";
  EXPECT_EQ(QueryText("SELECT worker_id FROM attempts WHERE trial_id = 3 ORDER BY attempt DESC"),
            "b");
  ExpectScoresEqualLmEval(trial, "piqa,lambada_openai", "zs");  // each score stored once
}

}  // namespace
}  // namespace spheret
