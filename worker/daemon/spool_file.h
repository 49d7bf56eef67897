// The worker's spool file: the spool's items not yet acknowledged by the coordinator, so that a
// worker that dies (or loses power) replays them when it starts again.
//
// Records: one byte kind ('B' an event batch, 'F' an attempt end), a 4-byte little-endian length,
// the serialized message. Appends are fsynced before they return; a rewrite goes to a temporary
// file that is fsynced and renamed over the spool only when it was written whole, so a failed
// rewrite leaves the old spool as it was. A torn last record (a crash mid-append) is dropped;
// damage (a bad kind, a record longer than the limit or that does not parse) is skipped up to the
// next whole record, with an error naming its offset, so the records after it (Finishes among
// them) are still read. Not thread-safe (Spool holds its lock).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "spheret/v1/workers.pb.h"

namespace spheret::worker {

struct SpoolItem {
  bool is_finish = false;
  v1::EventBatch batch;      // when !is_finish
  v1::FinishRequest finish;  // when is_finish
  int64_t trial_id() const { return is_finish ? finish.trial_id() : batch.trial_id(); }
  int attempt() const { return is_finish ? finish.attempt() : batch.attempt(); }
};

// A record longer than this is corrupt (the coordinator accepts no message above 4 MiB).
inline constexpr uint32_t kMaxSpoolRecordBytes = 4u << 20;

// The records of `bytes` (a spool file's content) in order. A torn tail is dropped silently. A
// damaged record is skipped up to the next offset that holds a record exactly as the worker
// writes one (kind, length, a payload that parses and writes back byte for byte, a trial and an
// attempt), and *error says where and how many bytes were skipped. Never allocates more than a
// record's declared length, and that only up to kMaxSpoolRecordBytes.
std::vector<SpoolItem> ParseSpool(const std::string& bytes, std::string* error);

// One record as it is written.
std::string SpoolRecord(const SpoolItem& item);

class SpoolFile {
 public:
  explicit SpoolFile(std::string path) : path_(std::move(path)) {}
  ~SpoolFile();
  SpoolFile(const SpoolFile&) = delete;
  SpoolFile& operator=(const SpoolFile&) = delete;

  // Reads what the file holds (missing: nothing) into *items, then rewrites it with exactly
  // those and opens it for appending. A corrupt record is logged by the caller through *error.
  absl::Status Open(std::vector<SpoolItem>* items, std::string* error);
  // Appends one record and fsyncs it.
  absl::Status Append(const SpoolItem& item);
  // Replaces the file's content by `items` (atomically, durably); the old file stays on failure.
  absl::Status Rewrite(const std::vector<const SpoolItem*>& items);
  const std::string& path() const { return path_; }
  int64_t bytes() const { return bytes_; }

 private:
  absl::Status Reopen();
  std::string path_;
  FILE* file_ = nullptr;
  int64_t bytes_ = 0;  // the file's size as written
};

}  // namespace spheret::worker
