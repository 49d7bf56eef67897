// What the worker sends the coordinator, built from what its trainers do: a trainer's event lines
// added to an attempt's pending batch (typed here, so no JSON is parsed past the worker), and the
// Finish item that reports how an attempt ended.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "protocol/trainer_events.h"
#include "spheret/v1/workers.pb.h"
#include "worker/daemon/spool_file.h"

namespace spheret::worker {

// A batch is sent once it holds this many items or bytes (the bytes an event adds are bounded by
// protocol::kMaxEventLineBytes). kMaxBatchBytes is also the coordinator's limit of one
// IngestEvents message: a batch that grew past it (by its last event, or in a spool written by an
// older worker) goes as several messages (SplitBatch).
inline constexpr int kMaxBatchItems = 1'000;
inline constexpr size_t kMaxBatchBytes = 1 << 20;

// `batch` as messages of at most `max_bytes` each (one part when it fits), its rows in order and
// its checkpoint in the last part; every part names the batch's trial and attempt.
// ResourceExhausted ("... larger than max ...", which the spool does not retry) for a row that
// fits in no message.
absl::StatusOr<std::vector<v1::EventBatch>> SplitBatch(const v1::EventBatch& batch,
                                                       size_t max_bytes);

// Adds `event` (parsed from `line`, the trainer's `seq`-th stdout line) to `batch`: a metric as a
// row stamped `wall_ms`, a checkpoint as the batch's checkpoint (the caller sends a batch that
// already has one first), a diag event as a typed row (its line is not sent), anything else as a
// stored event, typed when it is an eval. Returns about how many bytes the batch grew by.
size_t AddToBatch(const protocol::TrainerEvent& event, const std::string& line, int64_t seq,
                  int64_t wall_ms, v1::EventBatch* batch);

// Stores, for a stdout line of `line_bytes` bytes over protocol::kMaxEventLineBytes (of which
// `prefix` is the start), an error event that says so and shows its first bytes, in place of the
// line. Returns about how many bytes the batch grew by.
size_t AddOverlongLine(const std::string& prefix, size_t line_bytes, int64_t seq,
                       v1::EventBatch* batch);

// The number of items in `batch` (metric rows, stored events, diag rows, a checkpoint).
int BatchItems(const v1::EventBatch& batch);

// A Finish of `worker_id`'s attempt of `lease` with `outcome` and the trainer's exit code (and,
// for a failure, the tail of its stderr or the reason it could not start).
SpoolItem FinishItem(const std::string& worker_id, int64_t trial_id, int attempt,
                     v1::TrialState outcome, int exit_code, const std::string& stderr_tail);

}  // namespace spheret::worker
