// The worker's spool: its ordered queue to the coordinator: trial event batches and attempt ends
// (Finish), sent one at a time in the order they were pushed, so a trial's last events always
// precede its Finish. Every item is also appended (fsynced) to a spool file
// (worker/daemon/spool_file.h) until it is acknowledged; while the coordinator is unreachable, or
// refuses the worker's token, items wait (in memory and in the file) and are replayed in order when
// it answers again. A restarted worker replays what its spool still holds. Replays are harmless:
// the coordinator stores metric rows and events idempotently and refuses a Finish for an attempt
// that already ended. Only an answer that no retry can change (a stale attempt, an invalid item,
// an item over the message limit) drops an item, through the rejected callback, so the items
// behind it move on. Errors that are retried are logged (RpcErrorLog). Thread-safe.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "spheret/v1/workers.grpc.pb.h"
#include "worker/daemon/rpc_error_log.h"
#include "worker/daemon/spool_file.h"

namespace spheret::worker {

struct SpoolOptions {
  std::string spool_path;        // the spool file (created when missing)
  std::string token;             // bearer token, "" for none
  int call_timeout_ms = 10'000;  // per RPC
  int max_backoff_ms = 2'000;    // retry interval ceiling while the coordinator is away
  // Above this many spooled bytes the spool is full(): the worker takes no new trials until it
  // drains (the trials it runs go on, and nothing is dropped).
  int64_t max_spool_bytes = int64_t{1} << 30;
};

// Whether the coordinator's answer `status` is final for an item (dropped through the rejected
// callback): a stale attempt, an invalid item, or an item larger than a message may be
// (RESOURCE_EXHAUSTED "... larger than max ..."; the spool refuses to send one above
// kMaxSpoolRecordBytes itself). Anything else (unreachable, overloaded, a token refused after a
// rotation) is retried: the items behind it wait, so no answer that is final may be retried.
bool FinalRejection(const grpc::Status& status);

class Spool {
 public:
  // Called (on the sender thread) for an item the coordinator refused for good (FinalRejection);
  // the item is dropped.
  using RejectedCallback = std::function<void(const SpoolItem&, const grpc::Status&)>;

  Spool(std::shared_ptr<grpc::Channel> channel, SpoolOptions options, RejectedCallback rejected);
  ~Spool();  // stops sending; unsent items stay in the spool

  // Loads what the spool holds (from an earlier run) and starts sending.
  absl::Status Start();
  void Push(SpoolItem item);
  // Waits until everything is acknowledged or `timeout_ms` passes; true when empty.
  bool Flush(int timeout_ms);
  size_t depth() const;
  // Adds the (trial, attempt) of each Finish not yet acknowledged to `out`, once each: the worker
  // lists them at Register and Heartbeat, so that the coordinator keeps their leases until they
  // arrive.
  void AddFinishes(google::protobuf::RepeatedPtrField<v1::AttemptId>* out) const;
  // The spool is above max_spool_bytes.
  bool full() const;
  int64_t sent_batches() const;
  bool coordinator_reachable() const;

 private:
  void Loop();
  grpc::Status Send(const SpoolItem& item);

  std::unique_ptr<v1::WorkerService::Stub> stub_;
  SpoolOptions options_;
  RejectedCallback rejected_;
  RpcErrorLog errors_;        // the errors of items that are retried
  mutable std::mutex mutex_;  // guards everything below
  std::condition_variable changed_;
  SpoolFile file_;
  std::deque<SpoolItem> queue_;
  bool stopping_ = false;
  bool reachable_ = true;
  int64_t sent_batches_ = 0;
  std::thread sender_;
};

}  // namespace spheret::worker
