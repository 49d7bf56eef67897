// The worker's ordered outbox to the coordinator: trial event batches and attempt ends (Finish),
// sent one at a time in the order they were pushed, so a trial's last events always precede its
// Finish. Every item is also appended (fsynced) to a spool file (worker/agent/spool.h) until it is
// acknowledged; while the coordinator is unreachable, or refuses the worker's token, items wait
// (in memory and in the file) and are replayed in order when it answers again. A restarted worker
// replays what its spool still holds. Replays are harmless: the coordinator stores metric rows and
// events idempotently and refuses a Finish for an attempt that already ended. Only an answer that
// no retry can change (a stale attempt, an invalid item) drops an item, through the rejected
// callback. Thread-safe.
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
#include "worker/agent/spool.h"

namespace spheret::agent {

struct OutboxOptions {
  std::string spool_path;        // the spool file (created when missing)
  std::string token;             // bearer token, "" for none
  int call_timeout_ms = 10'000;  // per RPC
  int max_backoff_ms = 2'000;    // retry interval ceiling while the coordinator is away
  // Above this many spooled bytes the outbox is full(): the worker takes no new trials until it
  // drains (the trials it runs go on, and nothing is dropped).
  int64_t max_spool_bytes = int64_t{1} << 30;
};

// Whether the coordinator's answer `status` is final for an item (dropped through the rejected
// callback): a stale attempt or an invalid item. Anything else (unreachable, overloaded, a token
// refused after a rotation) is retried.
bool FinalRejection(const grpc::Status& status);

class Outbox {
 public:
  // Called (on the sender thread) for an item the coordinator refused for good (FinalRejection);
  // the item is dropped.
  using RejectedCallback = std::function<void(const OutboxItem&, const grpc::Status&)>;

  Outbox(std::shared_ptr<grpc::Channel> channel, OutboxOptions options, RejectedCallback rejected);
  ~Outbox();  // stops sending; unsent items stay in the spool

  // Loads what the spool holds (from an earlier run) and starts sending.
  absl::Status Start();
  void Push(OutboxItem item);
  // Waits until everything is acknowledged or `timeout_ms` passes; true when empty.
  bool Flush(int timeout_ms);
  size_t depth() const;
  // The spool is above max_spool_bytes.
  bool full() const;
  int64_t sent_batches() const;
  bool coordinator_reachable() const;

 private:
  void Loop();
  grpc::Status Send(const OutboxItem& item);

  std::unique_ptr<v1::WorkerService::Stub> stub_;
  OutboxOptions options_;
  RejectedCallback rejected_;
  mutable std::mutex mutex_;  // guards everything below
  std::condition_variable changed_;
  Spool spool_;
  std::deque<OutboxItem> queue_;
  bool stopping_ = false;
  bool reachable_ = true;
  int64_t sent_batches_ = 0;
  std::thread sender_;
};

}  // namespace spheret::agent
