// The worker's ordered outbox to the coordinator: trial event batches and attempt ends (Finish),
// sent one at a time in the order they were pushed, so a trial's last events always precede its
// Finish. Every item is also appended to a spool file until it is acknowledged; while the
// coordinator is unreachable items wait (in memory and in the file) and are replayed in order when
// it returns. A restarted worker replays what its spool still holds. Replays are harmless: the
// coordinator stores metric rows and events idempotently and refuses a Finish for an attempt that
// already ended. Thread-safe.
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

namespace spheret::agent {

struct OutboxItem {
  bool is_finish = false;
  v1::EventBatch batch;      // when !is_finish
  v1::FinishRequest finish;  // when is_finish
  int64_t trial_id() const { return is_finish ? finish.trial_id() : batch.trial_id(); }
  int attempt() const { return is_finish ? finish.attempt() : batch.attempt(); }
};

struct OutboxOptions {
  std::string spool_path;        // the spool file (created when missing)
  std::string token;             // bearer token, "" for none
  int call_timeout_ms = 10'000;  // per RPC
  int max_backoff_ms = 2'000;    // retry interval ceiling while the coordinator is away
};

class Outbox {
 public:
  // Called (on the sender thread) for an item the coordinator refused for good, e.g. a stale
  // attempt (FAILED_PRECONDITION); the item is dropped.
  using RejectedCallback = std::function<void(const OutboxItem&, const grpc::Status&)>;

  Outbox(std::shared_ptr<grpc::Channel> channel, OutboxOptions options, RejectedCallback rejected);
  ~Outbox();  // stops sending; unsent items stay in the spool

  // Loads what the spool holds (from an earlier run) and starts sending.
  absl::Status Start();
  void Push(OutboxItem item);
  // Waits until everything is acknowledged or `timeout_ms` passes; true when empty.
  bool Flush(int timeout_ms);
  size_t depth() const;
  int64_t sent_batches() const;
  bool coordinator_reachable() const;

 private:
  void Loop();
  grpc::Status Send(const OutboxItem& item);
  absl::Status Append(const OutboxItem& item);  // to the spool file; call with mutex_ held
  void RewriteSpool();                          // with what is still queued

  std::unique_ptr<v1::WorkerService::Stub> stub_;
  OutboxOptions options_;
  RejectedCallback rejected_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<OutboxItem> queue_;
  bool stopping_ = false;
  bool reachable_ = true;
  int64_t sent_batches_ = 0;
  std::thread sender_;
};

}  // namespace spheret::agent
