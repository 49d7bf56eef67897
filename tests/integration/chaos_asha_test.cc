// The chaos test with an ASHA sweep (ctest label chaos): at full size 20 search trials (2 methods
// x 10 learning rates, grouped by method; rungs at 50 and 150 of 300 steps, eta 3) on three workers
// under the chaos driver of chaos_fixture.h. It must end with every trial SUCCEEDED or PRUNED,
// every verdict stored once and as the rule gives it when the rung's values are replayed in the
// order they were judged, no trial stopped twice, every PRUNED trial stopped by a verdict (or a
// NaN), each curve with every step it trained exactly once, an intact database and no trial left
// RUNNING. Bounded like the grid's: the chaos lasts ChaosSize::chaos_s seconds, the whole run at
// most kDeadlineS. The default suite's small seed: 8 trials of 90 steps (see its instantiation).
#include <algorithm>
#include <map>
#include <sstream>

#include "tests/integration/chaos_fixture.h"

namespace spheret {
namespace {

using testing_util::ChaosSize;
using testing_util::ChaosTest;
using testing_util::Clock;
using testing_util::kDeadlineS;
using testing_util::kFull;
using testing_util::kWorkers;
using testing_util::SeedName;

class AshaChaosTest : public ChaosTest {
 protected:
  void ExpectVerdictsAndCurves(int64_t sweep);

  // The ten learning rates at full size; a small search has four, the best at a rung (the
  // largest) first: in increasing order each would be judged the best so far and promoted.
  static std::string LearningRates(int n) {
    return n >= 10 ? "1e-4, 2e-4, 3e-4, 5e-4, 7e-4, 1e-3, 1.5e-3, 2e-3, 3e-3, 4e-3"
                   : "4e-3, 1e-4, 3e-4, 1e-3";
  }

  int trials() const { return 2 * GetParam().seeds; }
};

// Replays the stored verdicts of each (group, rung) in the order they were judged (rowid) and
// counts those that disagree with the rule (the best 1/eta of the values there so far, its own
// included, at least the best one; ties continue).
int64_t WrongVerdicts(const std::string& rows) {
  std::map<std::string, std::vector<double>> seen;  // group/rung -> values so far
  int64_t wrong = 0;
  std::stringstream lines(rows);
  std::string key;
  double value = 0;
  int promoted = 0;
  while (lines >> key >> value >> promoted) {
    std::vector<double>& values = seen[key];
    values.insert(std::upper_bound(values.begin(), values.end(), value), value);
    const size_t kept = std::max<size_t>(values.size() / 3, 1);
    wrong += (value <= values[kept - 1]) != (promoted != 0);
  }
  return wrong;
}

TEST_P(AshaChaosTest, EveryTrialEndsSucceededOrPrunedByItsRungs) {
  const ChaosSize size = GetParam();
  std::mt19937 rng(size.seed);
  for (const char* worker : kWorkers) Start(worker);
  // Rungs at a sixth of the run and three times that (50 and 150 of 300 steps at full size).
  const std::string rung = std::to_string(size.steps / 6);
  const std::string base =
      "{scale: xs, n_layer: 2, block_size: 32, batch_size: 4, gradient_accumulation_steps: 1, "
      "max_iters: " +
      std::to_string(size.steps) + ", lr_decay_iters: " + std::to_string(size.steps) +
      ", warmup_iters: 2, eval_interval: " + rung + ", eval_iters: 1, log_interval: 1}";
  const int64_t sweep = Submit("name: chaos-asha\ndataset: tiny\nbase: " + base +
                               "\nparameters:\n  method: {values: [pre_ln, geonorm]}\n"
                               "  learning_rate: {values: [" +
                               LearningRates(size.seeds) +
                               "]}\n"
                               "search: {strategy: asha, min_iters: " +
                               rung +
                               ", reduction_factor: 3, group_by: [method]}\n"
                               "max_restarts: 100\n");
  ASSERT_GT(sweep, 0);
  const size_t trials_n = trials();
  const auto terminal = [&](const std::vector<v1::Trial>& trials) {
    return trials.size() == trials_n && std::all_of(trials.begin(), trials.end(), [](auto& t) {
             return t.state() == v1::TRIAL_STATE_SUCCEEDED || t.state() == v1::TRIAL_STATE_PRUNED;
           });
  };
  const auto start = Clock::now();
  std::string log;
  while (Clock::now() - start < std::chrono::seconds(size.chaos_s) && !terminal(Trials(sweep))) {
    std::this_thread::sleep_for(std::chrono::milliseconds(700 + rng() % 1'300));
    log += Strike(rng) + "\n";
  }
  ASSERT_TRUE(WaitFor(sweep, kDeadlineS - size.chaos_s, terminal))
      << "chaos steps:\n"
      << log << Log("coordinator") << Log("a") << Log("b") << Log("c");
  ExpectVerdictsAndCurves(sweep);
  const int64_t pruned = Query("SELECT count(*) FROM trials WHERE state = 'PRUNED'");
  std::cout << "asha chaos seed " << size.seed << ": " << pruned << " of " << trials_n
            << " trials PRUNED, " << Query("SELECT count(*) FROM rung_values") << " verdicts, "
            << Query("SELECT sum(attempt) FROM trials") << " attempts, done after "
            << std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - start).count()
            << " s):\n"
            << log;
}

// Every verdict stored once and right, no trial stopped twice, whole curves, nothing left running.
void AshaChaosTest::ExpectVerdictsAndCurves(int64_t sweep) {
  const int64_t pruned = Query("SELECT count(*) FROM trials WHERE state = 'PRUNED'");
  EXPECT_GE(pruned, 1) << "a search of 4 or 10 per group stops some";
  EXPECT_EQ(Query("SELECT count(*) FROM rung_values WHERE rung = 0"), trials())
      << "every trial judged once at rung 0";
  EXPECT_EQ(Query("SELECT count(*) FROM (SELECT trial_id FROM rung_values WHERE promoted = 0 "
                  "GROUP BY trial_id HAVING count(*) > 1)"),
            0)
      << "no trial stopped twice";
  EXPECT_EQ(Query("SELECT count(*) FROM trials t WHERE state = 'PRUNED' AND NOT EXISTS (SELECT 1 "
                  "FROM rung_values r WHERE r.trial_id = t.trial_id AND r.promoted = 0)"),
            0)
      << "every PRUNED trial has the verdict that stopped it";
  const std::string rows = QueryText(
      "SELECT group_concat(search_group || '/' || rung || ' ' || value || ' ' || promoted, "
      "char(10)) FROM (SELECT * FROM rung_values ORDER BY rowid)");
  EXPECT_EQ(WrongVerdicts(rows), 0) << rows;
  for (const v1::Trial& trial : Trials(sweep)) {
    const int64_t trained = Query(
        "SELECT coalesce(max(step), -1) + 1 FROM curves WHERE metric = 'train/loss' AND "
        "trial_id = " +
        std::to_string(trial.trial_id()));
    if (trial.state() == v1::TRIAL_STATE_SUCCEEDED) {
      EXPECT_EQ(trained, GetParam().steps);
    }
    ExpectCompleteCurve(trial.trial_id(), static_cast<int>(trained));
  }
  EXPECT_EQ(QueryText("PRAGMA integrity_check"), "ok");
  EXPECT_EQ(Query("SELECT count(*) FROM trials WHERE state IN ('RUNNING', 'PENDING')"), 0);
  EXPECT_EQ(Query("SELECT count(*) FROM leases"), 0);
}

// Small: 8 trials (4 learning rates a method) of 90 steps, rungs at 15 and 45, 12 s of strikes;
// with 4 a group, rung 0 keeps one in three of those judged so far, so it prunes some.
INSTANTIATE_TEST_SUITE_P(Small, AshaChaosTest, testing::Values(ChaosSize{1, 4, 90, 12, 0, 3}),
                         SeedName);
INSTANTIATE_TEST_SUITE_P(ThreeSeeds, AshaChaosTest, testing::ValuesIn(kFull), SeedName);

}  // namespace
}  // namespace spheret
