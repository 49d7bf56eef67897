#include "worker/daemon/spool.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdint>
#include <iterator>
#include <set>

#include "absl/strings/str_cat.h"
#include "net/call_context.h"

namespace spheret::worker {

bool FinalRejection(const grpc::Status& status) {
  switch (status.error_code()) {
    case grpc::StatusCode::RESOURCE_EXHAUSTED:  // final when the item is over a message limit
      return status.error_message().find("larger than max") != std::string::npos;
    case grpc::StatusCode::FAILED_PRECONDITION:  // a stale attempt: fenced off for good
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::NOT_FOUND:
    case grpc::StatusCode::ALREADY_EXISTS:
    case grpc::StatusCode::OUT_OF_RANGE:
      return true;
    default:
      return false;
  }
}

Spool::Spool(std::shared_ptr<grpc::Channel> channel, SpoolOptions options,
             RejectedCallback rejected)
    : stub_(v1::WorkerService::NewStub(channel)),
      options_(std::move(options)),
      rejected_(std::move(rejected)),
      file_(options_.spool_path) {}

Spool::~Spool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (sender_.joinable()) sender_.join();
}

absl::Status Spool::Start() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<SpoolItem> items;
    std::string corrupt;
    if (absl::Status opened = file_.Open(&items, &corrupt); !opened.ok()) {
      return absl::FailedPreconditionError("cannot write spool file " + options_.spool_path + ": " +
                                           std::string(opened.message()));
    }
    if (!corrupt.empty()) spdlog::error("spool {}: {}", options_.spool_path, corrupt);
    if (!items.empty()) {
      spdlog::info("spool {}: {} item(s) to send again", options_.spool_path, items.size());
    }
    queue_.assign(std::make_move_iterator(items.begin()), std::make_move_iterator(items.end()));
  }
  sender_ = std::thread([this] { Loop(); });
  return absl::OkStatus();
}

void Spool::Push(SpoolItem item) {
  std::lock_guard<std::mutex> lock(mutex_);
  // A full disk loses durability across a worker crash, not the item: it still waits in memory.
  if (absl::Status spooled = file_.Append(item); !spooled.ok()) {
    spdlog::warn("spool: {} (the item waits in memory only)", std::string(spooled.message()));
  }
  queue_.push_back(std::move(item));
  changed_.notify_all();
}

bool Spool::full() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return file_.bytes() > options_.max_spool_bytes;
}

bool Spool::Flush(int timeout_ms) {
  std::unique_lock<std::mutex> lock(mutex_);
  return changed_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                           [this] { return queue_.empty(); });
}

size_t Spool::depth() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.size();
}

void Spool::AddFinishes(google::protobuf::RepeatedPtrField<v1::AttemptId>* out) const {
  std::set<std::pair<int64_t, int>> finishes;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const SpoolItem& item : queue_) {
      if (item.is_finish) finishes.emplace(item.trial_id(), item.attempt());
    }
  }
  for (const auto& [trial_id, attempt] : finishes) {
    v1::AttemptId* finished = out->Add();
    finished->set_trial_id(trial_id);
    finished->set_attempt(attempt);
  }
}

int64_t Spool::sent_batches() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return sent_batches_;
}

bool Spool::coordinator_reachable() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return reachable_;
}

grpc::Status Spool::Send(const SpoolItem& item) {
  // An item no coordinator accepts (from a spool written before batches were bounded) is not sent.
  const size_t bytes = item.is_finish ? item.finish.ByteSizeLong() : item.batch.ByteSizeLong();
  if (bytes > kMaxSpoolRecordBytes) {
    return {grpc::StatusCode::RESOURCE_EXHAUSTED,
            absl::StrCat("the ", item.is_finish ? "finish" : "event batch", " is ", bytes,
                         " bytes, larger than max of a message (", kMaxSpoolRecordBytes, ")")};
  }
  grpc::ClientContext context;  // waits for ready: replays as soon as the coordinator is back
  net::PrepareCall(&context, {options_.token, absl::Milliseconds(options_.call_timeout_ms),
                              /*wait_for_ready=*/true});
  if (item.is_finish) {
    v1::FinishResponse response;
    return stub_->Finish(&context, item.finish, &response);
  }
  v1::IngestEventsResponse response;
  std::unique_ptr<grpc::ClientWriter<v1::EventBatch>> writer =
      stub_->IngestEvents(&context, &response);
  writer->Write(item.batch);
  writer->WritesDone();
  return writer->Finish();
}

void Spool::Loop() {
  int backoff_ms = 100;
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    if (queue_.empty()) {
      changed_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      continue;
    }
    const SpoolItem item = queue_.front();
    lock.unlock();
    const grpc::Status status = Send(item);
    const bool retry = !status.ok() && !FinalRejection(status);
    if (!status.ok() && !retry && rejected_) rejected_(item, status);
    if (retry) {
      errors_.Log(item.is_finish ? "Finish" : "IngestEvents", status,
                  std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
    }
    if (retry && (status.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
                  status.error_code() == grpc::StatusCode::PERMISSION_DENIED)) {
      spdlog::warn(
          "the coordinator refuses this worker's token ({}); {} item(s) wait in the "
          "spool: restart the worker with a valid --token",
          status.error_message(), depth());
    }
    lock.lock();
    reachable_ = !retry;
    if (retry) {
      changed_.wait_for(lock, std::chrono::milliseconds(backoff_ms), [this] { return stopping_; });
      backoff_ms = std::min(backoff_ms * 2, options_.max_backoff_ms);
      continue;
    }
    backoff_ms = 100;
    queue_.pop_front();
    if (!item.is_finish && status.ok()) ++sent_batches_;
    if (queue_.empty()) {  // everything acknowledged: the spool starts over
      if (absl::Status emptied = file_.Rewrite({}); !emptied.ok()) {
        spdlog::warn("spool: {} (its items are sent again after a restart; harmless)",
                     std::string(emptied.message()));
      }
    }
    changed_.notify_all();
  }
}

}  // namespace spheret::worker
