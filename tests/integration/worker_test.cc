// The worker daemon with real processes on loopback: spheret-coordinator, spheret-worker(s) with
// CPU slots and real spheret-lm runs at preset xs on a tiny data set. Every test is bounded in
// time.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <thread>

#include "server/store/sqlite_db.h"
#include "spheret/v1/sweeps.grpc.pb.h"
#include "tests/integration/child_process.h"
#include "tests/integration/cluster_fixture.h"
#include "tests/server/metrics_check.h"

namespace spheret {
namespace {

namespace fs = std::filesystem;
using testing_util::Base;
using testing_util::ChildProcess;
using testing_util::Env;
using Clock = std::chrono::steady_clock;

// A lease TTL of 3 s (heartbeats every second) and a retry back-off of 0.5 s: several tests wait
// for a lease to lapse or a trial to be retried, and what each asserts holds for any TTL the
// heartbeats keep alive.
class WorkerTest : public testing_util::ClusterTest {
 protected:
  void SetUp() override {
    lease_ttl_s_ = 3;
    retry_backoff_s_ = "0.5";
    ClusterTest::SetUp();
  }
};

TEST_F(WorkerTest, FourTrialSweepRunsToSucceededWithAllMetricsStored) {
  StartWorker("a", 1, "127.0.0.1:0");
  StartWorker("b", 1);
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while ((Log("a").find("registered as") == std::string::npos ||
          Log("b").find("registered as") == std::string::npos) &&
         Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const int64_t sweep = Submit("name: four\ndataset: tiny\nbase: " + Base(30, 10) +
                               "\nparameters:\n  method: {values: [pre_ln, geonorm]}\n"
                               "seeds: [1, 2]\n");
  ASSERT_TRUE(WaitFor(sweep, 240, [](auto& t) { return All(t, v1::TRIAL_STATE_SUCCEEDED); }))
      << Log("a") << Log("b");
  for (const v1::Trial& trial : Trials(sweep)) {
    EXPECT_EQ(trial.attempt(), 1);
    ExpectCompleteCurve(trial.trial_id(), 30);
    const std::string id = std::to_string(trial.trial_id());
    EXPECT_EQ(Query("SELECT count(*) FROM curves WHERE metric = 'val/loss' AND trial_id = " + id),
              4)
        << "val/loss at steps 0, 10, 20, 30";
    EXPECT_EQ(Query("SELECT count(*) FROM events WHERE json LIKE '%\"type\":\"done\"%' AND "
                    "trial_id = " +
                    id),
              1);
    EXPECT_EQ(Query("SELECT count(*) FROM checkpoints WHERE trial_id = " + id), 3);
  }
  EXPECT_EQ(Query("SELECT count(*) FROM attempts WHERE worker_id IN ('a', 'b')"), 4);
  std::printf("four trials: %lld ran on worker a, %lld on worker b\n",
              static_cast<long long>(Query("SELECT count(*) FROM attempts WHERE worker_id = 'a'")),
              static_cast<long long>(Query("SELECT count(*) FROM attempts WHERE worker_id = 'b'")));
  // The worker's own /metrics (its port is at the end of its start-up line) passes promtool.
  const std::string log = Log("a");
  const size_t at = log.find(", metrics ");
  ASSERT_NE(at, std::string::npos) << log;
  const std::string page = testing_util::FetchMetrics(std::stoi(log.substr(at + 10)));
  EXPECT_NE(page.find("spheret_worker_slots{state=\"free\"} 1"), std::string::npos) << page;
  EXPECT_NE(page.find("spheret_worker_events_forwarded_total"), std::string::npos) << page;
  EXPECT_NE(page.find("spheret_worker_spool_depth "), std::string::npos) << page;
  EXPECT_NE(page.find("spheret_worker_trainer_processes "), std::string::npos) << page;
  std::string report;
  EXPECT_EQ(testing_util::PromtoolCheck(page, (dir_ / "metrics.txt").string(), &report), 0)
      << report;
}

// Issue 11, item 5: a trainer line like {"type":"metric","name":7} aborted the worker's reader
// thread (and so the worker). A scripted trainer writes hostile lines and a NaN diag among valid
// events: the bad lines are refused and logged, the rest flows, and both trials succeed on the
// same worker with their NaN values stored as NULL at their steps.
TEST_F(WorkerTest, MalformedTrainerLinesAreRefusedAndTheRestFlows) {
  const fs::path script = dir_ / "hostile-lm.sh";
  {
    std::ofstream out(script);
    out << "#!/bin/sh\n"
           "echo '{\"type\":\"metric\",\"name\":7}'\n"
           "echo '{\"type\":1}'\n"
           "echo 'not an event'\n"
           "echo '{\"type\":\"diag\",\"step\":0,\"layer\":1,\"sublayer\":\"attn\","
           "\"hidden_norm\":null,\"theta\":0.1,\"alpha\":null,\"radial\":0}'\n"
           "for s in 0 1 2 3 4; do\n"
           "  echo \"{\\\"type\\\":\\\"metric\\\",\\\"step\\\":$s,"
           "\\\"name\\\":\\\"train/loss\\\",\\\"value\\\":$s.5}\"\n"
           "done\n"
           "echo '{\"type\":\"metric\",\"step\":5,\"name\":\"train/loss\",\"value\":null}'\n"
           "echo '{\"type\":\"done\",\"step\":6}'\n";
  }
  fs::permissions(script, fs::perms::owner_all);
  StartWorker("a", 1, "", script.string());
  const int64_t sweep = Submit("name: hostile\ndataset: tiny\nbase: " + Base(6, 3) +
                               "\nparameters:\n  method: {values: [pre_ln]}\nseeds: [1, 2]\n");
  ASSERT_TRUE(WaitFor(sweep, 60, [](auto& t) { return All(t, v1::TRIAL_STATE_SUCCEEDED); }))
      << Log("a");
  for (const v1::Trial& trial : Trials(sweep)) {
    ExpectCompleteCurve(trial.trial_id(), 6);
    const std::string id = std::to_string(trial.trial_id());
    EXPECT_EQ(Query("SELECT count(*) FROM curves WHERE value IS NULL AND trial_id = " + id), 1);
    EXPECT_EQ(Query("SELECT count(*) FROM events WHERE trial_id = " + id), 1) << "done";
    // The diag row's values (flat form; a null alpha is no value): hidden_norm NULL, theta, radial.
    EXPECT_EQ(Query("SELECT count(*) FROM layer_values WHERE trial_id = " + id), 3);
    EXPECT_EQ(Query("SELECT count(*) FROM layer_curves WHERE field = 'hidden_norm' AND "
                    "value IS NULL AND step = 0 AND trial_id = " +
                    id),
              1);
  }
  EXPECT_NE(Log("a").find("trainer line refused (metric event: field 'step' is missing)"),
            std::string::npos)
      << Log("a");
  EXPECT_NE(Log("a").find("trainer line refused (field 'type' must be a string, got 1)"),
            std::string::npos);
}

TEST_F(WorkerTest, StoppedWorkerHandsItsTrialBackForAnotherToResume) {
  ChildProcess& a = StartWorker("a", 1);
  const int64_t sweep = Submit("name: handback\ndataset: tiny\nbase: " + Base(100, 10) +
                               "\nparameters:\n  method: {values: [pre_ln]}\n");
  ASSERT_TRUE(WaitFor(sweep, 120, [](auto& t) { return LatestStep(t[0]) >= 15; })) << Log("a");
  const auto start = Clock::now();
  const int status = a.Signal(SIGTERM);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "worker exit status " << status;
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 5.0 + 1.0)
      << "the worker took longer than the grace period";
  EXPECT_NE(Log("a").find("-> TRIAL_STATE_PENDING"), std::string::npos) << Log("a");
  std::vector<v1::Trial> trials = Trials(sweep);
  ASSERT_EQ(trials.size(), 1u);
  EXPECT_EQ(trials[0].state(), v1::TRIAL_STATE_PENDING) << "handed back, not failed";
  StartWorker("b", 1);
  ASSERT_TRUE(WaitFor(sweep, 120, [](auto& t) { return All(t, v1::TRIAL_STATE_SUCCEEDED); }))
      << Log("b");
  EXPECT_EQ(Trials(sweep)[0].attempt(), 2);
  EXPECT_NE(Log("b").find("resuming from a checkpoint"), std::string::npos);
  ExpectCompleteCurve(trials[0].trial_id(), 100);
}

TEST_F(WorkerTest, CancellingASweepStopsItsTrainersWithinTheGracePeriod) {
  StartWorker("a", 2);
  const int64_t sweep = Submit("name: long\ndataset: tiny\nbase: " + Base(100000, 100000) +
                               "\nparameters:\n  method: {values: [pre_ln]}\nseeds: [1, 2]\n");
  ASSERT_TRUE(WaitFor(sweep, 120, [](auto& trials) {
    return std::all_of(trials.begin(), trials.end(), [](auto& t) { return LatestStep(t) >= 2; });
  })) << Log("a");
  const auto start = Clock::now();
  grpc::ClientContext context;
  v1::CancelSweepRequest cancel;
  cancel.set_sweep_id(sweep);
  v1::CancelResponse response;
  ASSERT_TRUE(sweeps_->CancelSweep(&context, cancel, &response).ok());
  EXPECT_EQ(response.stopping_running(), 2);
  ASSERT_TRUE(WaitFor(sweep, 30, [](auto& t) { return All(t, v1::TRIAL_STATE_CANCELLED); }))
      << Log("a");
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  // The worker hears of it on its next heartbeat (every TTL/3 s); the trainers checkpoint and exit
  // on SIGTERM long before the 5 s grace runs out.
  EXPECT_LT(seconds, lease_ttl_s_ / 3.0 + 5.0 + 1.0);
  std::printf("cancel: both trials CANCELLED %.1f s after CancelSweep\n", seconds);
  EXPECT_NE(Log("a").find("-> TRIAL_STATE_CANCELLED"), std::string::npos);
}

// The first spheret-lm whose parent is `parent`, or 0.
pid_t TrainerOf(pid_t parent) {
  for (const auto& entry : fs::directory_iterator("/proc")) {
    std::ifstream stat(entry.path() / "stat");
    std::string pid, comm, state;
    pid_t ppid = 0;
    if (stat >> pid >> comm >> state >> ppid && ppid == parent && comm == "(spheret-lm)") {
      return std::stoi(pid);
    }
  }
  return 0;
}

TEST_F(WorkerTest, KilledWorkerTrialFinishesOnTheOtherFromItsCheckpoint) {
  ChildProcess& a = StartWorker("a", 1);
  // Killed past step 25 of 100, so past its checkpoint at step 20, long before its end.
  const int64_t sweep = Submit("name: moved\ndataset: tiny\nbase: " + Base(100, 10) +
                               "\nparameters:\n  method: {values: [geonorm]}\n");
  ASSERT_TRUE(WaitFor(sweep, 120, [](auto& t) { return LatestStep(t[0]) >= 25; })) << Log("a");
  a.Signal(SIGKILL);  // its trainer dies with it (parent-death signal)
  StartWorker("b", 1);
  ASSERT_TRUE(WaitFor(sweep, 180, [](auto& t) { return All(t, v1::TRIAL_STATE_SUCCEEDED); }))
      << Log("b");
  const v1::Trial trial = Trials(sweep)[0];
  EXPECT_EQ(trial.attempt(), 2);
  const std::string id = std::to_string(trial.trial_id());
  EXPECT_EQ(Query("SELECT count(*) FROM attempts WHERE attempt = 2 AND worker_id = 'b' AND "
                  "trial_id = " +
                  id),
            1);
  EXPECT_NE(Log("b").find("resuming from a checkpoint"), std::string::npos) << Log("b");
  EXPECT_GT(Query("SELECT count(*) FROM scalars WHERE superseded = 1 AND trial_id = " + id), 0)
      << "attempt 1 ran past the checkpoint attempt 2 resumed from";
  ExpectCompleteCurve(trial.trial_id(), 100);
}

TEST_F(WorkerTest, FrozenWorkerPastItsLeaseIsRefusedAndDropsTheTrial) {
  ChildProcess& a = StartWorker("a", 1);
  const int64_t sweep = Submit("name: frozen\ndataset: tiny\nbase: " + Base(100, 50) +
                               "\nparameters:\n  method: {values: [pre_ln]}\n");
  ASSERT_TRUE(WaitFor(sweep, 120, [](auto& t) { return LatestStep(t[0]) >= 5; })) << Log("a");
  a.Send(SIGSTOP);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // calls in flight land
  const std::string attempt1 = "SELECT count(*) FROM scalars WHERE attempt = 1";
  const int64_t rows_at_stop = Query(attempt1);
  StartWorker("b", 1);
  ASSERT_TRUE(WaitFor(sweep, 60, [](auto& t) { return t[0].attempt() == 2; })) << Log("b");
  a.Send(SIGCONT);
  ASSERT_TRUE(WaitFor(sweep, 240, [](auto& t) { return All(t, v1::TRIAL_STATE_SUCCEEDED); }))
      << Log("a") << Log("b");
  EXPECT_EQ(Query(attempt1), rows_at_stop) << "a write of the stale attempt was stored";
  EXPECT_NE(Log("a").find("refused"), std::string::npos) << Log("a");
  const auto deadline = Clock::now() + std::chrono::seconds(15);
  while (TrainerOf(a.pid()) != 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(TrainerOf(a.pid()), 0) << "the frozen worker kept its stale trainer";
  ExpectCompleteCurve(Trials(sweep)[0].trial_id(), 100);
}

// The coordinator is away for its lease TTL and 2 s more (a sleep: the least time it is away,
// whatever the pace) while the trainer runs on: without the downtime added to its lease at the
// restart, the lease would have lapsed and the trial run a second attempt.
TEST_F(WorkerTest, CoordinatorAwayPastTheLeaseTtlLosesAndDoublesNothing) {
  StartWorker("a", 1);
  const int steps = 600;
  const int64_t sweep = Submit("name: outage\ndataset: tiny\nbase: " + Base(steps, 300) +
                               "\nparameters:\n  method: {values: [pre_ln]}\n");
  ASSERT_TRUE(WaitFor(sweep, 120, [](auto& t) { return LatestStep(t[0]) >= 20; })) << Log("a");
  EXPECT_EQ(coordinator_->Signal(SIGTERM), 0);
  std::this_thread::sleep_for(std::chrono::seconds(lease_ttl_s_ + 2));
  StartCoordinator("127.0.0.1:" + std::to_string(port_));
  ASSERT_TRUE(WaitFor(sweep, 240, [](auto& t) { return All(t, v1::TRIAL_STATE_SUCCEEDED); }))
      << Log("a");
  const v1::Trial trial = Trials(sweep)[0];
  EXPECT_EQ(trial.attempt(), 1) << "the lease outlived the outage";
  ExpectCompleteCurve(trial.trial_id(), steps);
  EXPECT_EQ(Query("SELECT count(*) FROM scalars WHERE metric_id = (SELECT metric_id FROM "
                  "metric_names WHERE name = 'train/loss')"),
            steps)
      << "every step stored once";
}

TEST_F(WorkerTest, KilledTrainerFailsTheAttemptWithItsStderrAndIsRetried) {
  ChildProcess& a = StartWorker("a", 1);
  const int64_t sweep = Submit("name: crashy\ndataset: tiny\nbase: " + Base(100, 20) +
                               "\nparameters:\n  method: {values: [pre_ln]}\n");
  ASSERT_TRUE(WaitFor(sweep, 120, [](auto& t) { return LatestStep(t[0]) >= 25; })) << Log("a");
  const pid_t trainer = TrainerOf(a.pid());
  ASSERT_GT(trainer, 0);
  kill(trainer, SIGKILL);
  ASSERT_TRUE(WaitFor(sweep, 180, [](auto& t) { return All(t, v1::TRIAL_STATE_SUCCEEDED); }))
      << Log("a");
  const v1::Trial trial = Trials(sweep)[0];
  EXPECT_EQ(trial.attempt(), 2);
  const std::string first =
      " FROM attempts WHERE attempt = 1 AND trial_id = " + std::to_string(trial.trial_id());
  EXPECT_EQ(Query("SELECT outcome = 'FAILED'" + first), 1);
  EXPECT_EQ(Query("SELECT exit_code" + first), 128 + SIGKILL);
  EXPECT_GT(Query("SELECT length(stderr_tail)" + first), 0) << "the stderr tail is recorded";
  ExpectCompleteCurve(trial.trial_id(), 100);
}

TEST_F(WorkerTest, TwoRankGangAcrossTwoWorkersTrainsOneCurve) {
  StartWorker("a", 1);
  StartWorker("b", 1);
  std::string base = Base(30, 10);
  base.replace(base.find("gradient_accumulation_steps: 1"), 30, "gradient_accumulation_steps: 2");
  const int64_t sweep = Submit("name: gang\ndataset: tiny\nbase: " + base +
                               "\nparameters:\n  method: {values: [pre_ln]}\n"
                               "resources: {nodes: 2, cpu_slots: 1}\n");
  ASSERT_TRUE(WaitFor(sweep, 180, [](auto& t) { return All(t, v1::TRIAL_STATE_SUCCEEDED); }))
      << Log("a") << Log("b");
  const v1::Trial trial = Trials(sweep)[0];
  EXPECT_EQ(trial.attempt(), 1);
  ExpectCompleteCurve(trial.trial_id(), 30);
  EXPECT_NE((Log("a") + Log("b")).find("started 1 rank(s)"), std::string::npos);
}

// A test CA (pki/ca.pem) and a server and a client certificate it signed (pki/server.pem,
// pki/client.pem, their keys), for 127.0.0.1 and localhost, made by openssl.
void MakeTestPki(const fs::path& pki) {
  fs::create_directories(pki);
  const std::string p = pki.string() + "/";
  const std::string script =
      "set -e; cd " + p +
      "\n"
      "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 "
      "-subj /CN=spheret-test-ca\n"
      "for who in server client; do\n"
      "  openssl req -newkey rsa:2048 -nodes -keyout $who.key -out $who.csr -subj /CN=$who\n"
      "  echo 'subjectAltName=IP:127.0.0.1,DNS:localhost' > $who.ext\n"
      "  openssl x509 -req -in $who.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 "
      "-extfile $who.ext -out $who.pem\n"
      "done\n";
  std::ofstream(pki / "make.sh") << script;
  ASSERT_EQ(std::system(("bash " + p + "make.sh > " + p + "make.log 2>&1").c_str()), 0)
      << "openssl failed";
}

std::string FileText(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Issue 11, item 12: a coordinator that requires mutual TLS is reached by a worker and the CLI
// with the documented flags (before, the worker hard-coded an insecure channel and the CLI could
// present no client certificate, so --tls-client-ca locked every shipped client out). A client
// without a certificate, or without TLS, is refused.
TEST_F(WorkerTest, SecurityAcrossHostsWorkerAndCliSpeakMutualTls) {
  const fs::path pki = dir_ / "pki";
  ASSERT_NO_FATAL_FAILURE(MakeTestPki(pki));
  const std::string p = pki.string() + "/";
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = FileText(pki / "ca.pem");
  ssl.pem_cert_chain = FileText(pki / "client.pem");
  ssl.pem_private_key = FileText(pki / "client.key");
  credentials_ = grpc::SslCredentials(ssl);
  coordinator_flags_ = {"--tls-cert",     p + "server.pem",  "--tls-key",
                        p + "server.key", "--tls-client-ca", p + "ca.pem"};
  coordinator_.reset();
  StartCoordinator("127.0.0.1:0");
  const std::vector<std::string> client_tls = {"--tls-ca",       p + "ca.pem", "--tls-cert",
                                               p + "client.pem", "--tls-key",  p + "client.key"};
  worker_flags_ = client_tls;
  StartWorker("a", 1);
  std::ofstream(dir_ / "sweep.yaml") << "name: tls\ndataset: tiny\nbase: " << Base(10, 5)
                                     << "\nparameters: {method: {values: [pre_ln]}}\n";
  const std::string address = "127.0.0.1:" + std::to_string(port_);
  const auto cli = [&](std::vector<std::string> flags, const std::vector<std::string>& args) {
    std::vector<std::string> argv = {Env("SPHERET_CLI"), "--coordinator", address, "--timeout",
                                     "10"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), args.begin(), args.end());
    ChildProcess run(argv, (dir_ / "cli.out").string(), (dir_ / "cli.err").string());
    return run.Wait();
  };
  ASSERT_EQ(cli(client_tls, {"submit", (dir_ / "sweep.yaml").string()}), 0)
      << Log("cli") << Log("coordinator");
  ASSERT_TRUE(WaitFor(1, 60, [](auto& t) { return All(t, v1::TRIAL_STATE_SUCCEEDED); }))
      << "the sweep ran through the worker's mutual-TLS channel: " << Log("a");
  ExpectCompleteCurve(Trials(1)[0].trial_id(), 10);
  EXPECT_NE(cli({"--tls-ca", p + "ca.pem"}, {"sweeps"}), 0) << "no client certificate: refused";
  EXPECT_NE(cli({}, {"sweeps"}), 0) << "no TLS: refused";
  EXPECT_EQ(cli(client_tls, {"sweeps"}), 0) << Log("cli");
}

}  // namespace
}  // namespace spheret
