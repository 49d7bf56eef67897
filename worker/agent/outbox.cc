#include "worker/agent/outbox.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace spheret::agent {
namespace {

// Spool records: one byte kind ('B' batch, 'F' finish), 4-byte little-endian length, the
// serialized message.
bool ReadRecord(std::istream& in, OutboxItem* item) {
  char kind = 0;
  unsigned char size[4];
  if (!in.get(kind) || !in.read(reinterpret_cast<char*>(size), 4)) return false;
  const uint32_t length = size[0] | size[1] << 8 | size[2] << 16 | uint32_t(size[3]) << 24;
  std::string bytes(length, '\0');
  if (!in.read(bytes.data(), length)) return false;  // a torn last record: dropped
  item->is_finish = kind == 'F';
  return item->is_finish ? item->finish.ParseFromString(bytes) : item->batch.ParseFromString(bytes);
}

void WriteRecord(std::ostream& out, const OutboxItem& item) {
  const std::string bytes =
      item.is_finish ? item.finish.SerializeAsString() : item.batch.SerializeAsString();
  const uint32_t length = static_cast<uint32_t>(bytes.size());
  const char size[4] = {char(length & 0xff), char(length >> 8 & 0xff), char(length >> 16 & 0xff),
                        char(length >> 24 & 0xff)};
  out.put(item.is_finish ? 'F' : 'B').write(size, 4).write(bytes.data(), bytes.size());
}

bool Transient(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAVAILABLE ||
         status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
         status.error_code() == grpc::StatusCode::CANCELLED ||
         status.error_code() == grpc::StatusCode::UNKNOWN ||
         status.error_code() == grpc::StatusCode::INTERNAL ||
         status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED;
}

}  // namespace

Outbox::Outbox(std::shared_ptr<grpc::Channel> channel, OutboxOptions options,
               RejectedCallback rejected)
    : stub_(v1::WorkerService::NewStub(channel)),
      options_(std::move(options)),
      rejected_(std::move(rejected)) {}

Outbox::~Outbox() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (sender_.joinable()) sender_.join();
}

absl::Status Outbox::Start() {
  std::ifstream in(options_.spool_path, std::ios::binary);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    OutboxItem item;
    while (in && ReadRecord(in, &item)) queue_.push_back(item);
  }
  RewriteSpool();  // drops a torn tail, keeps the rest
  std::ofstream probe(options_.spool_path, std::ios::binary | std::ios::app);
  if (!probe)
    return absl::FailedPreconditionError("cannot write spool file " + options_.spool_path);
  sender_ = std::thread([this] { Loop(); });
  return absl::OkStatus();
}

void Outbox::Push(OutboxItem item) {
  std::lock_guard<std::mutex> lock(mutex_);
  // A full disk loses durability across a worker crash, not the item: it still waits in memory.
  Append(item).IgnoreError();
  queue_.push_back(std::move(item));
  changed_.notify_all();
}

bool Outbox::Flush(int timeout_ms) {
  std::unique_lock<std::mutex> lock(mutex_);
  return changed_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                           [this] { return queue_.empty(); });
}

size_t Outbox::depth() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.size();
}

int64_t Outbox::sent_batches() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return sent_batches_;
}

bool Outbox::coordinator_reachable() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return reachable_;
}

grpc::Status Outbox::Send(const OutboxItem& item) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(options_.call_timeout_ms));
  context.set_wait_for_ready(true);  // replay as soon as the coordinator is back
  if (!options_.token.empty()) context.AddMetadata("authorization", "Bearer " + options_.token);
  if (item.is_finish) {
    v1::FinishResponse response;
    return stub_->Finish(&context, item.finish, &response);
  }
  v1::ReportEventsResponse response;
  std::unique_ptr<grpc::ClientWriter<v1::EventBatch>> writer =
      stub_->ReportEvents(&context, &response);
  writer->Write(item.batch);
  writer->WritesDone();
  return writer->Finish();
}

void Outbox::Loop() {
  int backoff_ms = 100;
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    if (queue_.empty()) {
      changed_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      continue;
    }
    const OutboxItem item = queue_.front();
    lock.unlock();
    const grpc::Status status = Send(item);
    const bool transient = !status.ok() && Transient(status);
    if (!status.ok() && !transient && rejected_) rejected_(item, status);
    lock.lock();
    reachable_ = !transient;
    if (transient) {
      changed_.wait_for(lock, std::chrono::milliseconds(backoff_ms), [this] { return stopping_; });
      backoff_ms = std::min(backoff_ms * 2, options_.max_backoff_ms);
      continue;
    }
    backoff_ms = 100;
    queue_.pop_front();
    if (!item.is_finish && status.ok()) ++sent_batches_;
    if (queue_.empty()) std::ofstream(options_.spool_path, std::ios::binary | std::ios::trunc);
    changed_.notify_all();
  }
}

void Outbox::RewriteSpool() {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::string temporary = options_.spool_path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    for (const OutboxItem& item : queue_) WriteRecord(out, item);
  }
  std::rename(temporary.c_str(), options_.spool_path.c_str());
}

absl::Status Outbox::Append(const OutboxItem& item) {
  std::ofstream out(options_.spool_path, std::ios::binary | std::ios::app);
  WriteRecord(out, item);
  return out ? absl::OkStatus() : absl::UnavailableError("cannot append to the spool");
}

}  // namespace spheret::agent
