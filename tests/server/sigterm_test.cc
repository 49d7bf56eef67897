// SIGTERM to a coordinator process in the middle of a long dry run (issue 28 item 7): it used to
// finish the expansion first (minutes of a core for a big grid) before it stopped. The coordinator
// binary comes from $SPHERET_COORDINATOR.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "spheret/v1/sweeps.grpc.pb.h"
#include "tests/integration/child_process.h"

namespace spheret {
namespace {

// 1,000 values x 1,000 seeds: 1,000,000 trials (the process runs with --max-trials 1000000), each
// checked by the trainer's configuration code.
std::string MillionTrials() {
  std::string values = "1";
  for (int i = 2; i <= 1000; ++i) values += "," + std::to_string(i);
  return "name: big\ndataset: d\nparameters:\n  max_iters: {values: [" + values + "]}\nseeds: [" +
         values + "]\n";
}

TEST(SigtermTest, ALongDryRunDoesNotHoldUpShutdown) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("spheret_sigterm_test_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  testing_util::ChildProcess coordinator(
      {std::getenv("SPHERET_COORDINATOR"), "--db", (dir / "spheret.db").string(), "--listen",
       "127.0.0.1:0", "--metrics-listen", "", "--max-trials", "1000000"},
      (dir / "coordinator.out").string(), (dir / "coordinator.err").string());
  int port = 0, metrics_port = 0;
  ASSERT_EQ(
      std::sscanf(coordinator.FirstLine().c_str(), "listening %d metrics %d", &port, &metrics_port),
      2);
  auto sweeps = v1::SweepService::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  std::thread call([&] {
    grpc::ClientContext context;  // no deadline: only the shutdown ends it
    v1::SubmitSweepRequest request;
    request.set_spec_yaml(MillionTrials());
    request.set_dry_run(true);
    v1::SubmitSweepResponse response;
    grpc::Status status = sweeps->SubmitSweep(&context, request, &response);
    EXPECT_FALSE(status.ok()) << "the dry run finished before SIGTERM; make the grid bigger";
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));  // the expansion is under way
  const auto start = std::chrono::steady_clock::now();
  const int status = coordinator.Signal(SIGTERM);  // waits for the exit
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  call.join();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "wait status " << status;
  // main's shutdown grace is 2 s; the expansion notices the stop within milliseconds.
  EXPECT_LT(seconds, 5.0) << "the coordinator's log:\n"
                          << std::ifstream(dir / "coordinator.err").rdbuf();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace spheret
