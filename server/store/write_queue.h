// The store's single writer: a thread that owns the write connection and runs queued commands in
// order, grouping whatever is queued into one `BEGIN IMMEDIATE` transaction (group commit). Each
// command runs inside a savepoint, so one failing command does not undo the others; its future
// resolves only after COMMIT, with the command's own error or, when the transaction did not
// commit (COMMIT failed, or SQLite rolled it back by itself after a full disk or an I/O error),
// with that error for every command of the batch: no command is reported done that is not on
// disk, and none runs outside the batch's transaction. Thread-safe.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/status/status.h"
#include "server/store/sqlite_db.h"

namespace spheret::store {

class WriteQueue {
 public:
  using Command = std::function<absl::Status(Database&)>;

  WriteQueue(std::unique_ptr<Database> db, int max_batch);
  ~WriteQueue();  // runs what is queued, then stops

  std::future<absl::Status> Submit(Command command);
  // Submit and wait.
  absl::Status Run(Command command) { return Submit(std::move(command)).get(); }
  // A command of the chain (decisions that build on each other): it runs only while no earlier
  // chained command has failed, by its own error or in a batch that did not commit. Once one has,
  // every later chained command fails (Unavailable) without running, until ResetChain's turn.
  std::future<absl::Status> SubmitChained(Command command);
  // Mends a broken chain; resolves once every command queued before it is done.
  std::future<absl::Status> ResetChain();
  void OnCommit(std::function<void(double seconds)> callback);
  int64_t commits() const;

 private:
  enum class Kind { kPlain, kChained, kResetChain };
  struct Item {
    Command command;
    std::promise<absl::Status> done;
    Kind kind = Kind::kPlain;
  };
  std::future<absl::Status> Enqueue(Command command, Kind kind);
  void Loop();
  void RunBatch(std::deque<Item>& batch);

  std::unique_ptr<Database> db_;
  const int max_batch_;
  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Item> queue_;
  bool stopping_ = false;
  int64_t commits_ = 0;
  std::function<void(double)> on_commit_;
  bool chain_broken_ = false;  // the writer thread's own
  std::thread thread_;  // last: starts after everything above exists
};

}  // namespace spheret::store
