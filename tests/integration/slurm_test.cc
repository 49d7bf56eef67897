// spheret under a real Slurm: Debian's munged, slurmctld and slurmd on this machine (one node,
// two CPUs, every daemon on 127.0.0.1), the coordinator beside them, and workers started only by
// sbatch of deploy/slurm/spheret-worker.sbatch. A two-trial CPU sweep runs through it; scancel of
// the first worker job hands its trial back, and a second job finishes it from its checkpoint.
// Skipped unless the Slurm and munge daemons are installed (make deps installs them) and the test
// runs as root (slurmd must).
#include <unistd.h>

#include <cstdlib>

#include "tests/integration/cluster_fixture.h"

namespace spheret {
namespace {

using testing_util::Base;
using testing_util::ChildProcess;
using testing_util::Env;
namespace fs = std::filesystem;

bool HaveProgram(const std::string& name) {
  return std::system(("command -v " + name + " > /dev/null 2>&1").c_str()) == 0;
}

// The stdout of `command` (run by sh), trailing newline removed.
std::string Shell(const std::string& command) {
  std::string out;
  if (FILE* pipe = popen(command.c_str(), "r")) {
    char buffer[512];
    while (fgets(buffer, sizeof(buffer), pipe) != nullptr) out += buffer;
    pclose(pipe);
  }
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// A free TCP port on 127.0.0.1 (the OS's choice, released at once).
int FreePort() {
  return std::atoi(
      Shell("python3 -c 'import socket; s=socket.socket(); s.bind((\"127.0.0.1\", 0)); "
            "print(s.getsockname()[1])'")
          .c_str());
}

// munged, slurmctld and slurmd in the foreground, their files under `dir`; SLURM_CONF points the
// Slurm commands (and the jobs) at it.
class SlurmCluster {
 public:
  explicit SlurmCluster(const fs::path& dir) : dir_(dir) {
    fs::create_directories(dir_ / "state");
    fs::create_directories(dir_ / "spool");
    Shell("mungekey --create --keyfile " + (dir_ / "munge.key").string() + " 2>&1");
    munged_ = Start({"/usr/sbin/munged", "--foreground", "--force",
                     "--key-file=" + (dir_ / "munge.key").string(), "--socket=" + Socket(),
                     "--pid-file=" + (dir_ / "munged.pid").string(),
                     "--log-file=" + (dir_ / "munged.log").string(),
                     "--seed-file=" + (dir_ / "munge.seed").string()},
                    "munged");
    WriteConfig();
    setenv("SLURM_CONF", (dir_ / "slurm.conf").string().c_str(), 1);
    for (int i = 0; i < 50 && !fs::exists(Socket()); ++i) usleep(100'000);
    slurmctld_ =
        Start({"/usr/sbin/slurmctld", "-D", "-f", (dir_ / "slurm.conf").string()}, "slurmctld");
    slurmd_ =
        Start({"/usr/sbin/slurmd", "-D", "-N", "localhost", "-f", (dir_ / "slurm.conf").string()},
              "slurmd");
  }

  // Cancels every job, waits (bounded) for their processes to end, then stops the daemons and
  // removes `dir` (unless the test failed).
  ~SlurmCluster() {
    Shell("scancel --quiet --user=root 2>&1");
    for (int i = 0; i < 600 && !Shell("squeue --noheader 2>/dev/null").empty(); ++i)
      usleep(100'000);
    slurmd_->Signal(SIGTERM);
    slurmctld_->Signal(SIGTERM);
    munged_->Signal(SIGTERM);
    unsetenv("SLURM_CONF");
    if (!testing::Test::HasFailure()) fs::remove_all(dir_);  // kept to look at otherwise
  }

  // Whether the node is idle within `timeout_s` (the cluster is up).
  bool WaitUntilIdle(int timeout_s) const {
    for (int i = 0; i < timeout_s * 10; ++i) {
      if (Shell("sinfo --noheader --format=%T 2>/dev/null") == "idle") return true;
      usleep(100'000);
    }
    return false;
  }

  // sbatch of `script` with `flags`; the job id, or "" (and its error in *error).
  std::string Submit(const std::string& script, const std::string& flags,
                     std::string* error) const {
    const std::string id = Shell("sbatch --parsable --chdir=" + dir_.string() +
                                 " --output=" + (dir_ / "job-%j.out").string() + " " + flags + " " +
                                 script + " 2>" + (dir_ / "sbatch.err").string());
    *error = Shell("cat " + (dir_ / "sbatch.err").string());
    return id;
  }

  // Whether job `id` has left the queue within `timeout_s`.
  bool WaitUntilGone(const std::string& id, int timeout_s) const {
    for (int i = 0; i < timeout_s * 10; ++i) {
      if (Shell("squeue --noheader --jobs=" + id + " 2>/dev/null").empty()) return true;
      usleep(100'000);
    }
    return false;
  }

  std::string JobOutput(const std::string& id) const {
    return Shell("cat " + (dir_ / ("job-" + id + ".out")).string() + " " +
                 (dir_ / ("job-" + id + "_0.out")).string() + " 2>/dev/null");
  }
  std::string Logs() const {
    return Shell("tail -n 20 " + (dir_ / "slurmctld.log").string() + " " +
                 (dir_ / "slurmd.log").string() + " 2>&1");
  }

 private:
  std::string Socket() const { return (dir_ / "munge.sock").string(); }

  std::unique_ptr<ChildProcess> Start(const std::vector<std::string>& argv,
                                      const std::string& name) {
    return std::make_unique<ChildProcess>(argv, (dir_ / (name + ".out")).string(),
                                          (dir_ / (name + ".err")).string());
  }

  // One node of two CPUs, both daemons bound to 127.0.0.1, no cgroups (a container has none to
  // give), KillWait 30 s (the worker's grace below it).
  void WriteConfig() const {
    const std::string d = dir_.string();
    std::ofstream(dir_ / "slurm.conf")
        << "ClusterName=spheret-test\nSlurmctldHost=localhost(127.0.0.1)\n"
        << "SlurmctldPort=" << FreePort() << "\nSlurmdPort=" << FreePort() << "\n"
        << "AuthType=auth/munge\nAuthInfo=socket=" << Socket() << "\nCredType=cred/munge\n"
        << "CommunicationParameters=NoCtldInAddrAny,NoInAddrAny\n"
        << "SlurmUser=root\nSlurmdUser=root\nStateSaveLocation=" << d << "/state\n"
        << "SlurmdSpoolDir=" << d << "/spool\nSlurmctldPidFile=" << d << "/slurmctld.pid\n"
        << "SlurmdPidFile=" << d << "/slurmd.pid\nSlurmctldLogFile=" << d << "/slurmctld.log\n"
        << "SlurmdLogFile=" << d << "/slurmd.log\nProctrackType=proctrack/linuxproc\n"
        << "TaskPlugin=task/none\nJobAcctGatherType=jobacct_gather/none\n"
        << "AccountingStorageType=accounting_storage/none\nSelectType=select/cons_tres\n"
        << "SelectTypeParameters=CR_CPU\nMpiDefault=none\nReturnToService=2\nKillWait=30\n"
        << "NodeName=localhost NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN\n"
        << "PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n";
  }

  fs::path dir_;
  std::unique_ptr<ChildProcess> munged_, slurmctld_, slurmd_;
};

// "" when the daemons are installed and the test runs as root (slurmd must), else why not.
std::string WhySlurmCannotRun() {
  for (const char* program : {"munged", "mungekey", "slurmctld", "slurmd", "sbatch"}) {
    if (!HaveProgram(program) && !fs::exists(std::string("/usr/sbin/") + program)) {
      return std::string(program) + " is not installed (make deps installs Slurm and munge)";
    }
  }
  return geteuid() == 0 ? "" : "slurmd must run as root";
}

class SlurmTest : public testing_util::ClusterTest {
 protected:
  // The worker script's settings, passed to the jobs only; SPHERET_SHARED holds the fixture's
  // runs/ and data/ (data set "tiny").
  std::string WorkerJobSettings() {
    return "--export=ALL,SPHERET_COORDINATOR=127.0.0.1:" + std::to_string(port_) +
           ",SPHERET_SHARED=" + dir_.string() +
           ",SPHERET_BIN=" + fs::path(Env("SPHERET_WORKER")).parent_path().string() +
           ",SPHERET_GRACE_MS=10000,SPHERET_WORK_DIR=" + dir_.string() + " ";
  }

  // Every trial of `sweep` has its whole 300-step curve in one attempt, but `handed_back`, whose
  // first attempt was handed back (PENDING) and whose second finished it.
  void ExpectWholeCurvesAndOneHandBack(int64_t sweep, int64_t handed_back) {
    for (const v1::Trial& trial : Trials(sweep)) {
      EXPECT_EQ(trial.attempt(), trial.trial_id() == handed_back ? 2 : 1) << trial.trial_id();
      ExpectCompleteCurve(trial.trial_id(), 300);
    }
    EXPECT_EQ(QueryText("SELECT outcome FROM attempts WHERE attempt = 1 AND trial_id = " +
                        std::to_string(handed_back)),
              "PENDING");
  }
};

TEST_F(SlurmTest, SbatchWorkersRunASweepAndScancelHandsATrialBackForTheNextJob) {
  if (const std::string why = WhySlurmCannotRun(); !why.empty()) GTEST_SKIP() << why;
  // Slurm's unix sockets live under its spool folder, and their paths must stay under 108 bytes.
  const fs::path slurm_dir =
      fs::temp_directory_path() / ("spheret-slurm-" + std::to_string(getpid()));
  fs::remove_all(slurm_dir);
  auto cluster = std::make_unique<SlurmCluster>(slurm_dir);
  SlurmCluster& slurm = *cluster;
  ASSERT_TRUE(slurm.WaitUntilIdle(30)) << slurm.Logs();
  const std::string settings = WorkerJobSettings();
  const std::string script =
      std::string(SPHERET_SOURCE_DIR) + "/deploy/slurm/spheret-worker.sbatch";

  // 300 steps: handed back past its checkpoint at step 50, long before its end.
  const int64_t sweep = Submit("name: slurm\ndataset: tiny\nbase: " + Base(300, 50) +
                               "\nparameters:\n  method: {values: [pre_ln]}\nseeds: [1, 2]\n");
  std::string error;
  const std::string first =
      slurm.Submit(script, settings + "--cpus-per-task=1", &error);  // one slot
  ASSERT_FALSE(first.empty()) << error;
  ASSERT_TRUE(WaitFor(sweep, 120, [](auto& t) { return LatestStep(t[0]) >= 60; }))
      << slurm.JobOutput(first) << slurm.Logs();
  const int64_t handed_back = Trials(sweep)[0].trial_id();
  EXPECT_EQ(Trials(sweep)[1].state(), v1::TRIAL_STATE_PENDING) << "one slot: one trial at a time";
  ASSERT_EQ(std::system(("scancel " + first).c_str()), 0);
  ASSERT_TRUE(slurm.WaitUntilGone(first, 60)) << slurm.JobOutput(first);
  ASSERT_TRUE(WaitFor(sweep, 30, [](auto& t) { return All(t, v1::TRIAL_STATE_PENDING); }))
      << slurm.JobOutput(first);
  EXPECT_NE(slurm.JobOutput(first).find("-> TRIAL_STATE_PENDING"), std::string::npos)
      << "the cancelled job's worker handed its trial back: " << slurm.JobOutput(first);

  // The second as a job array of one task (the array variant of the same script).
  const std::string second = slurm.Submit(script, settings + "--array=0 --cpus-per-task=2", &error);
  ASSERT_FALSE(second.empty()) << error;
  ASSERT_TRUE(WaitFor(sweep, 300, [](auto& t) { return All(t, v1::TRIAL_STATE_SUCCEEDED); }))
      << slurm.JobOutput(second) << slurm.Logs();
  ExpectWholeCurvesAndOneHandBack(sweep, handed_back);
  EXPECT_NE(slurm.JobOutput(second).find("resuming from a checkpoint"), std::string::npos)
      << slurm.JobOutput(second);
  cluster.reset();  // scancel, then the daemons stop: no worker outlives the cluster
  EXPECT_EQ(
      Shell("pgrep -f '[s]pheret-worker --coordinator 127.0.0.1:" + std::to_string(port_) + " '"),
      "");
}

// The coordinator as a Slurm job: it writes the address workers find it at, serves (tokens
// required; without TLS only as asked for, by SPHERET_INSECURE=1), and stops cleanly on scancel.
TEST_F(SlurmTest, TheCoordinatorRunsAsAJobAndStopsOnScancel) {
  if (const std::string why = WhySlurmCannotRun(); !why.empty()) GTEST_SKIP() << why;
  const fs::path slurm_dir =
      fs::temp_directory_path() / ("spheret-slurm-" + std::to_string(getpid()));
  fs::remove_all(slurm_dir);
  auto cluster = std::make_unique<SlurmCluster>(slurm_dir);
  ASSERT_TRUE(cluster->WaitUntilIdle(30)) << cluster->Logs();
  const int port = FreePort();
  const std::string token = Shell(Env("SPHERET_COORDINATOR") + " --db " +
                                  (dir_ / "job.db").string() + " --create-token read 2>/dev/null");
  ASSERT_FALSE(token.empty());
  std::string error;
  const std::string job = cluster->Submit(
      std::string(SPHERET_SOURCE_DIR) + "/deploy/slurm/spheret-coordinator.sbatch",
      "--export=ALL,SPHERET_SHARED=" + dir_.string() + ",SPHERET_DB=" + (dir_ / "job.db").string() +
          ",SPHERET_BIN=" + fs::path(Env("SPHERET_COORDINATOR")).parent_path().string() +
          ",SPHERET_LISTEN_HOST=127.0.0.1,SPHERET_ADVERTISE=127.0.0.1,SPHERET_INSECURE=1" +
          ",SPHERET_PORT=" + std::to_string(port) +
          ",SPHERET_METRICS_PORT=" + std::to_string(FreePort()),
      &error);
  ASSERT_FALSE(job.empty()) << error;
  const std::string address = "127.0.0.1:" + std::to_string(port);
  const std::string cli = std::string(SPHERET_CLI_PATH) + " --coordinator " + address;
  bool serving = false;
  for (int i = 0; i < 300 && !serving; ++i, usleep(100'000)) {
    serving = Shell("cat " + (dir_ / "coordinator.address").string() + " 2>/dev/null") == address &&
              Shell(cli + " --token " + token + " sweeps > /dev/null 2>&1 && echo up") == "up";
  }
  ASSERT_TRUE(serving) << cluster->JobOutput(job) << cluster->Logs();
  EXPECT_EQ(Shell(cli + " sweeps > /dev/null 2>&1 || echo refused"), "refused")
      << "a call without a token is refused, even on loopback";
  ASSERT_EQ(std::system(("scancel " + job).c_str()), 0);
  ASSERT_TRUE(cluster->WaitUntilGone(job, 60)) << cluster->JobOutput(job);
  EXPECT_EQ(Shell(cli + " --token " + token + " sweeps > /dev/null 2>&1 || echo down"), "down");
  EXPECT_NE(cluster->JobOutput(job).find("signal 15: shutting down"), std::string::npos)
      << cluster->JobOutput(job);
  EXPECT_TRUE(fs::exists(dir_ / "job.db"));
}

}  // namespace
}  // namespace spheret
