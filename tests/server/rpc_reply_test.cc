// The size of an Acquire reply (server/rpc/services.h, WorkerService): leases that would take it
// past the worker's receive limit are handed back, and an attempt whose lease fits in no reply
// fails with an error that says so. An Acquire answered after its caller's deadline hands its
// leases back too.
#include <thread>

#include "server/rpc/services.h"
#include "server/store/sqlite_db.h"
#include "tests/server/rpc_fixture.h"

namespace spheret {
namespace {

v1::AcquireResponse AcquireFrom(rpc::WorkerService& service, const std::string& worker, int free) {
  grpc::ServerContext context;
  v1::AcquireRequest request;
  request.set_worker_id(worker);
  request.set_free_slots(free);
  request.set_max_trials(free);
  request.set_rendezvous_port(29500);
  v1::AcquireResponse response;
  const grpc::Status status = service.Acquire(&context, &request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response;
}

// Issue 28, item 10: with leases of 1.0-1.45 KB (a 1,000-byte dataset: string knobs are capped at
// 1,024 bytes by validation, so this is the second line of defence) and room for 2,950 bytes, a
// 4-slot worker gets two leases and the next Acquire the other two (before: one reply with all
// four, which a worker with a 4 MiB receive limit never received when the strings were megabytes).
TEST_F(RpcTest, HostileInputAcquireRepliesStayUnderTheLimitAndHandTheRestBack) {
  Submit("name: big\ndataset: " + std::string(1'000, 'd') +
         "\nparameters: {method: {values: [pre_ln, geonorm]}}\nseeds: [1, 2]\n");
  ASSERT_TRUE(Register("w", 4).ok());
  rpc::Authorizer auth(&coordinator_->tokens(), /*required=*/false);
  rpc::WorkerService service(coordinator_.get(), &auth, /*max_reply_bytes=*/2'950);
  const v1::AcquireResponse first = AcquireFrom(service, "w", 4);
  ASSERT_EQ(first.leases_size(), 2);
  for (const v1::Lease& lease : first.leases()) {
    EXPECT_GT(lease.ByteSizeLong(), 1'000u);
    EXPECT_LT(lease.ByteSizeLong(), 1'450u);
  }
  EXPECT_LE(first.ByteSizeLong(), 2'950u);
  const v1::AcquireResponse second = AcquireFrom(service, "w", 2);
  ASSERT_EQ(second.leases_size(), 2) << "the two that did not fit were handed back";
  std::set<int64_t> trials;
  for (const auto* reply : {&first, &second}) {
    for (const v1::Lease& lease : reply->leases()) trials.insert(lease.trial_id());
  }
  EXPECT_EQ(trials.size(), 4u);
  EXPECT_EQ(AcquireFrom(service, "w", 4).leases_size(), 0);
}

// Issue 28, item 10: a lease larger than any reply fails its attempt at once, with the sizes in the
// attempt's stderr tail, instead of an attempt that times out unseen again and again.
TEST_F(RpcTest, HostileInputALeaseThatFitsInNoReplyFailsItsAttemptSayingWhy) {
  Submit("name: huge\ndataset: " + std::string(1'000, 'd') +
         "\nparameters: {method: {values: [geonorm]}}\nmax_restarts: 0\n");
  ASSERT_TRUE(Register("w", 1).ok());
  rpc::Authorizer auth(&coordinator_->tokens(), /*required=*/false);
  rpc::WorkerService service(coordinator_.get(), &auth, /*max_reply_bytes=*/600);
  EXPECT_EQ(AcquireFrom(service, "w", 1).leases_size(), 0);
  grpc::ClientContext context;
  v1::GetTrialLogsRequest request;
  request.set_trial_id(1);
  v1::TrialLogs logs;
  ASSERT_TRUE(sweeps_->GetTrialLogs(&context, request, &logs).ok());
  EXPECT_EQ(logs.trial().state(), v1::TRIAL_STATE_FAILED);
  ASSERT_EQ(logs.attempts_size(), 1);
  EXPECT_EQ(logs.attempts(0).outcome(), "FAILED");
  EXPECT_NE(logs.attempts(0).stderr_tail().find("over the limit of a reply to a worker (600 "
                                                "bytes): shorten the sweep's strings"),
            std::string::npos)
      << logs.attempts(0).stderr_tail();
}

// Issue 44, item 7: an Acquire whose commit waits past the caller's deadline (another connection
// holds the database's write lock for 1.5 s; the call's deadline is 0.4 s) hands its lease back,
// not charged as a failure. Before, the trial stayed RUNNING under a lease its worker never
// received, to expire as a failure.
TEST_F(RpcTest, AnAcquireAnsweredAfterItsDeadlineHandsItsLeasesBack) {
  Submit();
  ASSERT_TRUE(Register("w1", 1).ok());
  auto db = store::Database::Open((dir_ / "spheret.db").string(), /*read_only=*/false);
  ASSERT_TRUE(db.ok()) << db.status();
  ASSERT_TRUE((*db)->Exec("BEGIN IMMEDIATE").ok());
  std::thread release([&db] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1'500));
    EXPECT_TRUE((*db)->Exec("COMMIT").ok());
  });
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(400));
  v1::AcquireRequest request;
  request.set_worker_id("w1");
  request.set_free_slots(1);
  v1::AcquireResponse response;
  const grpc::Status status = workers_->Acquire(&context, request, &response);
  release.join();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << status.error_message();
  // The handler goes on after the caller gave up: wait until its commit (and hand-back) is done.
  std::optional<TrialRecord> trial;
  for (int i = 0; i < 50; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    trial = *store_->GetTrial(1);
    if (trial && trial->attempt == 1 && trial->state != TrialState::kRunning) break;
  }
  ASSERT_TRUE(trial.has_value());
  EXPECT_EQ(std::string(TrialStateName(trial->state)), "PENDING") << "the lease went to no one";
  EXPECT_EQ(trial->failures, 0);
  const std::vector<v1::Lease> again = Acquire("w1");
  ASSERT_EQ(again.size(), 1u) << "handed back: leased again at once, no back-off";
  EXPECT_EQ(again[0].trial_id(), 1);
  EXPECT_EQ(again[0].attempt(), 2);
}

}  // namespace
}  // namespace spheret
