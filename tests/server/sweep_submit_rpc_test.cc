// SubmitSweep under hostile sweep files over real gRPC (issue 28 items 7 and 12): errors arrive
// as short statuses, and a long dry run stops when its caller's deadline passes. EvaluateSweep
// (`spheret eval`) over gRPC: who may plan and who may schedule, a malformed request named.
#include <chrono>
#include <thread>

#include "base/sha256.h"
#include "server/rpc/convert.h"
#include "tests/server/rpc_fixture.h"

namespace spheret {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// 1,000 values x 1,000 seeds: 1,000,000 trials, each checked by the trainer's configuration code
// (about 20 s of a core on the test machine).
std::string MillionTrials() {
  std::string values = "1";
  for (int i = 2; i <= 1000; ++i) values += "," + std::to_string(i);
  return "name: big\ndataset: d\nparameters:\n  max_iters: {values: [" + values + "]}\nseeds: [" +
         values + "]\n";
}

// A coordinator that accepts the million-trial grid.
class LongDryRunTest : public RpcTest {
 protected:
  LongDryRunTest() { max_trials_ = 1'000'000; }
};

grpc::Status DryRun(v1::SweepService::Stub& sweeps, const std::string& yaml, int deadline_ms) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(deadline_ms));
  v1::SubmitSweepRequest request;
  request.set_spec_yaml(yaml);
  request.set_dry_run(true);
  v1::SubmitSweepResponse response;
  return sweeps.SubmitSweep(&context, request, &response);
}

// A 10,000-digit value came back as "received initial metadata size exceeds limit": the
// coordinator echoed it whole in the status message.
TEST_F(RpcTest, ATenThousandDigitValueIsRefusedWithAShortMessage) {
  grpc::Status status =
      DryRun(*sweeps_,
             "name: s\ndataset: d\nbase: {max_iters: " + std::string(10'000, '7') +
                 "}\nparameters: {method: {values: [pre_ln]}}\n",
             30'000);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_EQ(status.error_message(),
            "line 3: a value of 10000 bytes, above the limit of 4096 (starts "
            "'7777777777777777... (10000 bytes)')");
}

TEST(ToGrpcStatusTest, BoundsTheMessageAndKeepsTheCode) {
  const grpc::Status status =
      rpc::ToGrpcStatus(absl::InvalidArgumentError(std::string(100'000, 'x')));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(),
            std::string(rpc::kMaxStatusMessageBytes, 'x') + "... (100000 bytes)");
}

// The coordinator kept a core busy for minutes after the CLI's deadline, and shutdown waited for
// it. Now the expansion asks the call's deadline and cancellation.
TEST_F(LongDryRunTest, StopsAtItsDeadlineAndDoesNotHoldUpShutdown) {
  const std::string yaml = MillionTrials();
  grpc::Status status = DryRun(*sweeps_, yaml, 300);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << status.error_message();
  const auto stop = std::chrono::steady_clock::now();
  server_->Shutdown(0);  // waits for every handler to return
  EXPECT_LT(SecondsSince(stop), 2.0);
}

TEST_F(LongDryRunTest, ShutdownEndsOneWithoutADeadline) {
  const std::string yaml = MillionTrials();
  std::thread call([&] { DryRun(*sweeps_, yaml, 600'000); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto stop = std::chrono::steady_clock::now();
  server_->Shutdown(100);  // ends open calls after 100 ms
  EXPECT_LT(SecondsSince(stop), 2.0);
  call.join();
}

// A read token may ask what `spheret eval` would schedule, not schedule it; a trial that has not
// finished is named with its state; a `where` without '=' is refused.
TEST_F(RpcTest, EvaluateSweepPlansForReadersAndSchedulesForSubmitters) {
  Stop();
  Start(/*require_tokens=*/true);
  ASSERT_TRUE(store_->CreateToken(Sha256Hex("reader-token"), "r", Role::kRead, "", 1).ok());
  ASSERT_TRUE(store_->CreateToken(Sha256Hex("submit-token"), "s", Role::kSubmit, "", 1).ok());
  grpc::ClientContext submit_context;
  submit_context.AddMetadata("authorization", "Bearer submit-token");
  v1::SubmitSweepRequest submit;
  submit.set_spec_yaml(kSweep);
  v1::SubmitSweepResponse submitted;
  ASSERT_TRUE(sweeps_->SubmitSweep(&submit_context, submit, &submitted).ok());
  auto evaluate = [&](const char* token, bool dry_run, const std::string& where,
                      v1::EvaluateSweepResponse* response) {
    grpc::ClientContext context;
    context.AddMetadata("authorization", std::string("Bearer ") + token);
    v1::EvaluateSweepRequest request;
    request.set_sweep_id(submitted.sweep_id());
    request.add_tasks("piqa");
    request.set_data("zs");
    request.set_dry_run(dry_run);
    if (!where.empty()) request.add_where(where);
    return sweeps_->EvaluateSweep(&context, request, response);
  };
  v1::EvaluateSweepResponse plan;
  ASSERT_TRUE(evaluate("reader-token", /*dry_run=*/true, "", &plan).ok());
  ASSERT_EQ(plan.plans_size(), submitted.trial_count());
  EXPECT_EQ(plan.plans(0).note(), "is PENDING (only SUCCEEDED trials are evaluated)");
  EXPECT_EQ(plan.created_jobs(), 0);
  v1::EvaluateSweepResponse refused;
  EXPECT_EQ(evaluate("reader-token", false, "", &refused).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(evaluate("submit-token", false, "", &refused).ok());
  const grpc::Status malformed = evaluate("submit-token", false, "scale", &refused);
  EXPECT_EQ(malformed.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(malformed.error_message(), "where 'scale' is not knob=value");
}

}  // namespace
}  // namespace spheret
