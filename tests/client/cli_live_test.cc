// The spheret CLI against a live coordinator: submit --wait, watch (across a restart), cancel, sql,
// tokens, bad input.
#include "tests/client/cli_fixture.h"

namespace spheret {
namespace {

TEST_F(CliTest, SubmitWaitAndWatchFollowALiveSweep) {
  const fs::path file = *dir_ / "live.yaml";
  std::ofstream(file) << "name: cli-live\ndataset: fortunes\nbase: {max_iters: 100}\n"
                         "parameters: {method: {values: [pre_ln]}}\n"
                         "seeds: [1, 2]\nresources: {gpus: 0}\n";
  const fs::path submit_out = *dir_ / "submit.out";
  ChildProcess submit({SPHERET_CLI_PATH, "--coordinator", *address_, "--token", *token_, "submit",
                       file.string(), "--wait"},
                      submit_out.string(), (*dir_ / "submit.err").string());
  std::vector<v1::Lease> leases;
  for (int i = 0; i < 200 && leases.size() < 2; ++i) {  // the sweep appears when submit runs
    for (const v1::Lease& lease : Acquire("fake-live", 2 - static_cast<int>(leases.size())))
      leases.push_back(lease);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(leases.size(), 2u);
  const int64_t live_sweep = leases[0].sweep_id();
  const fs::path watch_out = *dir_ / "watch.out";
  ChildProcess watch({SPHERET_CLI_PATH, "--coordinator", *address_, "--token", *token_, "watch",
                      std::to_string(live_sweep)},
                     watch_out.string(), (*dir_ / "watch.err").string());
  // Both follow the sweep before it ends (on a loaded machine they may take a while to start).
  ASSERT_TRUE(WaitForText(submit_out, "RUNNING")) << ReadFile(*dir_ / "submit.err");
  ASSERT_TRUE(WaitForText(watch_out, "RUNNING")) << ReadFile(*dir_ / "watch.err");
  for (const v1::Lease& lease : leases) {
    Report(lease, 100);
    Finish("fake-live", lease, v1::TRIAL_STATE_SUCCEEDED);
  }
  for (ChildProcess* child : {&submit, &watch}) {
    const int status = child->Wait();  // each ends by itself when the sweep does
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << ReadFile(*dir_ / "submit.err") << ReadFile(*dir_ / "watch.err");
  }
  const std::string submitted = ReadFile(submit_out);
  EXPECT_EQ(submitted.rfind("sweep " + std::to_string(live_sweep) + ": 2 trials, 2 new\n", 0), 0u)
      << submitted;
  for (const std::string& lines : {submitted, ReadFile(watch_out)}) {
    EXPECT_NE(lines.find("RUNNING"), std::string::npos) << lines;
    EXPECT_NE(lines.find("step 100/100 loss"), std::string::npos) << lines;
    EXPECT_NE(lines.find("SUCCEEDED"), std::string::npos);
    EXPECT_NE(lines.find("ended: SUCCEEDED 2"), std::string::npos) << lines;
  }
}

TEST_F(CliTest, CancelStopsAPendingSweep) {
  int64_t sweep = 0;
  const fs::path pending = *dir_ / "pending.yaml";
  std::ofstream(pending) << "name: cli-cancel\ndataset: fortunes\nseeds: [1, 2, 3]\n"
                            "parameters: {method: {values: [pre_ln]}}\n"
                            "resources: {gpus: 0}\n";
  CliResult second = Cli({"submit", pending.string()});
  ASSERT_EQ(second.exit_code, 0) << second.err;
  ASSERT_EQ(std::sscanf(second.out.c_str(), "sweep %ld:", &sweep), 1);
  CliResult cancel = Cli({"cancel", std::to_string(sweep)});
  ASSERT_EQ(cancel.exit_code, 0) << cancel.err;
  EXPECT_EQ(cancel.out, "cancelled 3 pending trials; 0 running trials are stopping\n");
  const json trials = json::parse(Cli({"trials", "--sweep", std::to_string(sweep), "--json"}).out);
  for (const json& t : trials) EXPECT_EQ(t["state"], "TRIAL_STATE_CANCELLED");
}

TEST_F(CliTest, WatchReconnectsWhenTheCoordinatorRestarts) {
  const fs::path file = *dir_ / "restart.yaml";
  std::ofstream(file) << "name: cli-restart\ndataset: fortunes\nbase: {max_iters: 100}\n"
                         "parameters: {method: {values: [pre_ln]}}\nresources: {gpus: 0}\n";
  CliResult submitted = Cli({"submit", file.string()});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  std::vector<v1::Lease> leases = Acquire("fake-restart", 1);
  ASSERT_EQ(leases.size(), 1u);
  const fs::path watch_out = *dir_ / "watch-restart.out", watch_err = *dir_ / "watch-restart.err";
  ChildProcess watch({SPHERET_CLI_PATH, "--coordinator", *address_, "--token", *token_, "watch",
                      std::to_string(leases[0].sweep_id())},
                     watch_out.string(), watch_err.string());
  ASSERT_TRUE(WaitForText(watch_out, "RUNNING")) << ReadFile(watch_err);
  // SIGKILL and a restart on the same database and port; the lease survives the restart.
  delete coordinator_;
  coordinator_ = new ChildProcess(
      {SPHERET_COORDINATOR_PATH, "--db", *db_, "--listen", *address_, "--metrics-listen",
       "127.0.0.1:0", "--require-tokens", "--lease-ttl", "60"},
      (*dir_ / "coordinator2.out").string(), (*dir_ / "coordinator2.err").string());
  ASSERT_EQ(coordinator_->FirstLine().rfind("listening", 0), 0u)
      << ReadFile(*dir_ / "coordinator2.err");
  channel_ = grpc::CreateChannel(*address_, grpc::InsecureChannelCredentials());
  workers_ = v1::WorkerService::NewStub(channel_);
  Report(leases[0], 100);
  Finish("fake-restart", leases[0], v1::TRIAL_STATE_SUCCEEDED);
  const int status = watch.Wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << ReadFile(watch_err);
  EXPECT_NE(ReadFile(watch_err).find("reconnecting"), std::string::npos) << ReadFile(watch_err);
  EXPECT_NE(ReadFile(watch_out).find("ended: SUCCEEDED 1"), std::string::npos)
      << ReadFile(watch_out);
}

TEST_F(CliTest, SqlIsReadOnly) {
  CompletedSweep();
  CliResult count =
      Cli({"sql", "--db", *db_, "SELECT count(*) AS n FROM sweeps WHERE name = 'cli-test'",
           "--format", "csv"},
          false);
  ASSERT_EQ(count.exit_code, 0) << count.err;
  EXPECT_EQ(count.out, "n\n1\n");
  CliResult rows =
      Cli({"sql", "--db", *db_, "SELECT trial_id, state FROM trials ORDER BY trial_id LIMIT 2",
           "--format", "json"},
          false);
  ASSERT_EQ(rows.exit_code, 0) << rows.err;
  EXPECT_EQ(json::parse(rows.out).size(), 2u);
  for (const char* write :
       {"DELETE FROM trials", "UPDATE trials SET state = 'FAILED'", "PRAGMA journal_mode = DELETE",
        "ATTACH 'x.db' AS x", "SELECT 1; DELETE FROM trials"}) {
    CliResult refused = Cli({"sql", "--db", *db_, write}, false);
    EXPECT_EQ(refused.exit_code, 1) << write;
    EXPECT_EQ(Lines(refused.err), 1) << refused.err;
  }
  EXPECT_EQ(Cli({"sql", "--db", *db_,
                 "SELECT count(*) FROM trials WHERE state = 'FAILED' AND "
                 "sweep_id = 1",
                 "--format", "csv"},
                false)
                .out,
            "count(*)\n0\n");
  CliResult missing = Cli({"sql", "--db", (*dir_ / "nope.db").string(), "SELECT 1"}, false);
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("nope.db: no such database"), std::string::npos) << missing.err;
  // Issue 11, item 9: a query had no time budget (and a long read holds a snapshot that stops
  // the coordinator's WAL checkpoints). This one would count for hours.
  const auto start = std::chrono::steady_clock::now();
  CliResult endless = Cli({"sql", "--db", *db_,
                           "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) "
                           "SELECT count(*) FROM n",
                           "--timeout", "1"},
                          false);
  EXPECT_EQ(endless.exit_code, 1);
  EXPECT_EQ(endless.err,
            "spheret: error: sql: stopped after 1 s (--timeout); narrow the query or raise it\n");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

// Issue 28, item 11: one s || s is a single VM instruction, so the progress handler's deadline
// never fired inside it: this query ran 14.7 s under --timeout 5 and reached 4.0 GB.
TEST_F(CliTest, SqlBoundsValueLengthInsideOneInstruction) {
  const auto start = std::chrono::steady_clock::now();
  CliResult doubled = Cli({"sql", "--db", *db_,
                           "WITH RECURSIVE d(s) AS (SELECT 'x' UNION ALL SELECT s || s FROM d) "
                           "SELECT length(s) FROM d",
                           "--timeout", "5"},
                          false);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(doubled.exit_code, 1);
  EXPECT_EQ(doubled.err,
            "spheret: error: sql: a value grew past 16777216 bytes (the length limit of a string "
            "or blob); narrow the query\n");
  EXPECT_LT(took, std::chrono::seconds(4));
  std::string sum = "1";
  for (int i = 0; i < 300; ++i) sum += "+1";  // a tree 300 deep
  CliResult deep = Cli({"sql", "--db", *db_, "SELECT " + sum}, false);
  EXPECT_EQ(deep.exit_code, 1);
  EXPECT_NE(deep.err.find("maximum depth 200"), std::string::npos) << deep.err;
  CliResult long_query =
      Cli({"sql", "--db", *db_, "SELECT '" + std::string(120'000, 'a') + "'"}, false);
  EXPECT_EQ(long_query.err,
            "spheret: error: sql: the query is 120009 bytes; the limit is 100000\n");
}

// Issue 28, item 6: every list carried each sweep's file, so big files locked every reader out;
// a file is now fetched on its own.
TEST_F(CliTest, SweepPrintsItsFileOnlyWhenAsked) {
  const int64_t sweep_id = CompletedSweep();
  const std::string id = std::to_string(sweep_id);
  CliResult spec = Cli({"sweep", id, "--spec"});
  ASSERT_EQ(spec.exit_code, 0) << spec.err;
  EXPECT_EQ(spec.out, kSweep);
  CliResult shown = Cli({"sweep", id});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_EQ(shown.out.rfind("sweep " + id + " (cli-test) DONE", 0), 0u) << shown.out;
  EXPECT_NE(shown.out.find("8 trials: SUCCEEDED 8"), std::string::npos) << shown.out;
  CliResult listed = Cli({"sweeps", "--json"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  for (const json& sweep : json::parse(listed.out)) EXPECT_EQ(sweep["spec_yaml"], "");
}

TEST_F(CliTest, TokensCreateListRevoke) {
  CompletedSweep();  // writes sweep.yaml
  CliResult created = Cli({"tokens", "create", "read", "--name", "reader"});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  const std::string reader = created.out.substr(0, created.out.size() - 1);
  ASSERT_EQ(reader.rfind("sph_", 0), 0u) << created.out;
  CliResult expiring = Cli({"tokens", "create", "read", "--name", "monthly", "--ttl", "30d"});
  ASSERT_EQ(expiring.exit_code, 0) << expiring.err;
  CliResult listed = Cli({"tokens", "list"});
  EXPECT_NE(listed.out.find("reader"), std::string::npos) << listed.out;
  CliResult listed_json = Cli({"tokens", "list", "--json"});
  int expiring_tokens = 0;
  for (const json& token : json::parse(listed_json.out)) {
    if (token["expires_ms"] == "0") continue;
    ++expiring_tokens;
    EXPECT_EQ(token["name"], "monthly");
    const int64_t in_ms = std::stoll(token["expires_ms"].get<std::string>()) -
                          std::stoll(token["created_ms"].get<std::string>());
    EXPECT_EQ(in_ms, 30LL * 86'400'000);
  }
  EXPECT_EQ(expiring_tokens, 1) << listed_json.out;
  EXPECT_NE(listed.out.find("test-admin"), std::string::npos);
  EXPECT_EQ(listed.out.find(reader), std::string::npos) << "the secret must not be listed";
  EXPECT_EQ(Cli({"--coordinator", *address_, "--token", reader, "sweeps"}, false).exit_code, 0);
  CliResult denied = Cli(
      {"--coordinator", *address_, "--token", reader, "submit", (*dir_ / "sweep.yaml").string()},
      false);
  EXPECT_EQ(denied.exit_code, 1);
  EXPECT_NE(denied.err.find("a 'read' token may not call this method"), std::string::npos)
      << denied.err;
  CliResult not_admin =
      Cli({"--coordinator", *address_, "--token", reader, "tokens", "list"}, false);
  EXPECT_EQ(not_admin.exit_code, 1);
  CliResult revoked = Cli({"tokens", "revoke", "reader"});
  ASSERT_EQ(revoked.exit_code, 0) << revoked.err;
  EXPECT_EQ(revoked.out, "revoked 1 token(s) named 'reader'\n");
  CliResult after = Cli({"--coordinator", *address_, "--token", reader, "sweeps"}, false);
  EXPECT_EQ(after.exit_code, 1);
  EXPECT_NE(after.err.find("unknown token"), std::string::npos) << after.err;
}

TEST_F(CliTest, BadInputGivesOneLineAndNonZeroExit) {
  struct Case {
    std::vector<std::string> args;
    bool defaults;
    int exit_code;
    std::string message;
  };
  const fs::path malformed = *dir_ / "malformed.yaml";
  std::ofstream(malformed) << "name: bad\ndataset: fortunes\nbase: {metod: pre_ln}\n"
                              "parameters: {scale: {values: [xs]}}\n";
  const fs::path broken = *dir_ / "broken.yaml";
  std::ofstream(broken) << "name: bad\nparameters: [oops\n";
  const std::vector<Case> cases = {
      {{"submit", (*dir_ / "missing.yaml").string()}, true, 1, "missing.yaml: cannot read"},
      {{"submit", malformed.string()}, true, 1, "malformed.yaml: line 3: metod: unknown"},
      {{"submit", broken.string()}, true, 1, "broken.yaml: "},
      {{"--coordinator", "127.0.0.1:1", "sweeps"}, false, 1, "nothing is listening at 127.0.0.1:1"},
      {{"tokens", "create", "read", "--ttl", "3 weeks"}, true, 1, "--ttl '3 weeks': expected"},
      {{"--coordinator", *address_, "--token", "sph_wrong", "sweeps"},
       false,
       1,
       "refused the call (unknown token)"},
      {{"--coordinator", *address_, "sweeps"}, false, 1, "missing 'authorization"},
      {{"results", "1", "--format", "xml"}, true, 1, "--format: 'xml' is not one of"},
      {{"trials", "--state", "sleeping"}, true, 1, "--state 'sleeping'"},
      {{"plot", "1", "--out", (*dir_ / "x.gif").string()}, true, 1, "must end in .png or .svg"},
      {{"plot", "1", "--diag", "diag/theta/1/attn", "--out", (*dir_ / "x.png").string()},
       true,
       1,
       "--diag must name a per-layer field (1 to 40 of a-z, 0-9, _)"},
      {{"results", "424242"}, true, 1, "424242"},
      {{"sweeps", "--bogus"}, true, 2, "--bogus"},
      {{"tokens", "create", "root"}, true, 2, "root"},
  };
  for (const Case& c : cases) {
    CliResult result = Cli(c.args, c.defaults);
    std::string joined;
    for (const std::string& a : c.args) joined += a + " ";
    EXPECT_EQ(result.exit_code, c.exit_code) << joined << "\n" << result.err;
    EXPECT_EQ(Lines(result.err), 1) << joined << "\n" << result.err;
    EXPECT_NE(result.err.find(c.message), std::string::npos) << joined << "\n" << result.err;
  }
}

}  // namespace
}  // namespace spheret
