// The gRPC services of spheret.v1 over a Coordinator: every handler checks the caller's token,
// converts the request, calls the coordinator and maps its Status. Thread-safe (the coordinator
// is).
#pragma once

#include <atomic>

#include "server/coordinator.h"
#include "server/rpc/auth.h"
#include "spheret/v1/admin.grpc.pb.h"
#include "spheret/v1/sweeps.grpc.pb.h"
#include "spheret/v1/workers.grpc.pb.h"

namespace spheret::rpc {

// The limits of what one caller may hold open or ask for.
inline constexpr int kMaxWatchers = 64;           // concurrent WatchSweep streams
inline constexpr int kMaxReceiveBytes = 4 << 20;  // any one request message
// An Acquire reply (a worker's gRPC receive limit is 4 MiB): leases beyond it are handed back.
inline constexpr size_t kMaxAcquireReplyBytes = (4 << 20) - (64 << 10);
// A GetTrialLogs reply (a client's receive limit is 4 MiB): older events go to further pages.
inline constexpr size_t kMaxLogsReplyBytes = (4 << 20) - (64 << 10);
inline constexpr int kMaxLogEvents = 10'000;  // events one GetTrialLogs call asks for, all pages
// One IngestEvents message: a worker splits its batches below it (worker/daemon/batches.h).
inline constexpr size_t kMaxEventBatchBytes = 1 << 20;
inline constexpr int kKeepaliveMs = 30'000;         // ping idle connections this often...
inline constexpr int kKeepaliveTimeoutMs = 10'000;  // ...and drop those that do not answer
// How long an idle polling thread of the sync server waits for a call before it looks again
// (and sees a shutdown): bounds how long idle pollers hold up Shutdown beyond its grace (a
// handler must still check IsCancelled, as long ones do through their Interrupt).
inline constexpr int kPollTimeoutMs = 200;

class SweepService final : public v1::SweepService::Service {
 public:
  SweepService(Coordinator* coordinator, Authorizer* auth)
      : coordinator_(coordinator), auth_(auth) {}

  grpc::Status SubmitSweep(grpc::ServerContext* context, const v1::SubmitSweepRequest* request,
                           v1::SubmitSweepResponse* response) override;
  grpc::Status GetSweep(grpc::ServerContext* context, const v1::GetSweepRequest* request,
                        v1::Sweep* response) override;
  grpc::Status ListSweeps(grpc::ServerContext* context, const v1::ListSweepsRequest* request,
                          v1::ListSweepsResponse* response) override;
  grpc::Status ListTrials(grpc::ServerContext* context, const v1::ListTrialsRequest* request,
                          v1::ListTrialsResponse* response) override;
  grpc::Status CancelSweep(grpc::ServerContext* context, const v1::CancelSweepRequest* request,
                           v1::CancelResponse* response) override;
  grpc::Status CancelTrial(grpc::ServerContext* context, const v1::CancelTrialRequest* request,
                           v1::CancelResponse* response) override;
  grpc::Status ResumeTrial(grpc::ServerContext* context, const v1::ResumeTrialRequest* request,
                           v1::Trial* response) override;
  grpc::Status WatchSweep(grpc::ServerContext* context, const v1::WatchSweepRequest* request,
                          grpc::ServerWriter<v1::WatchSweepEvent>* writer) override;
  grpc::Status QueryResults(grpc::ServerContext* context, const v1::QueryResultsRequest* request,
                            v1::QueryResultsResponse* response) override;
  grpc::Status GetTrialLogs(grpc::ServerContext* context, const v1::GetTrialLogsRequest* request,
                            v1::TrialLogs* response) override;
  grpc::Status StreamCurves(grpc::ServerContext* context, const v1::StreamCurvesRequest* request,
                            grpc::ServerWriter<v1::Curve>* writer) override;
  grpc::Status StreamLayerValues(grpc::ServerContext* context,
                                 const v1::StreamLayerValuesRequest* request,
                                 grpc::ServerWriter<v1::LayerValues>* writer) override;
  grpc::Status EvaluateSweep(grpc::ServerContext* context, const v1::EvaluateSweepRequest* request,
                             v1::EvaluateSweepResponse* response) override;

 private:
  Coordinator* coordinator_;
  Authorizer* auth_;
  std::atomic<int> watchers_{0};
};

class WorkerService final : public v1::WorkerService::Service {
 public:
  // An Acquire reply holds at most `max_reply_bytes` of leases: the rest are handed back, and an
  // attempt whose lease alone is larger fails with an error that says so.
  WorkerService(Coordinator* coordinator, Authorizer* auth,
                size_t max_reply_bytes = kMaxAcquireReplyBytes)
      : coordinator_(coordinator), auth_(auth), max_reply_bytes_(max_reply_bytes) {}

  grpc::Status Register(grpc::ServerContext* context, const v1::RegisterRequest* request,
                        v1::RegisterResponse* response) override;
  grpc::Status Heartbeat(grpc::ServerContext* context, const v1::HeartbeatRequest* request,
                         v1::HeartbeatResponse* response) override;
  grpc::Status Acquire(grpc::ServerContext* context, const v1::AcquireRequest* request,
                       v1::AcquireResponse* response) override;
  grpc::Status IngestEvents(grpc::ServerContext* context,
                            grpc::ServerReader<v1::EventBatch>* reader,
                            v1::IngestEventsResponse* response) override;
  grpc::Status Finish(grpc::ServerContext* context, const v1::FinishRequest* request,
                      v1::FinishResponse* response) override;

 private:
  Coordinator* coordinator_;
  Authorizer* auth_;
  size_t max_reply_bytes_;
};

class TokenService final : public v1::TokenService::Service {
 public:
  TokenService(Coordinator* coordinator, Authorizer* auth)
      : coordinator_(coordinator), auth_(auth) {}

  grpc::Status CreateToken(grpc::ServerContext* context, const v1::CreateTokenRequest* request,
                           v1::CreateTokenResponse* response) override;
  grpc::Status ListTokens(grpc::ServerContext* context, const v1::ListTokensRequest* request,
                          v1::ListTokensResponse* response) override;
  grpc::Status RevokeToken(grpc::ServerContext* context, const v1::RevokeTokenRequest* request,
                           v1::RevokeTokenResponse* response) override;

 private:
  Coordinator* coordinator_;
  Authorizer* auth_;
};

}  // namespace spheret::rpc
