// The trainer protocol: what spheret-lm tells whoever runs it, defined once. The trainer writes
// these events as JSON lines on stdout (and into OUT/events.jsonl); the worker parses each line
// once, here, into a typed event and forwards typed messages, so the coordinator and the store
// never parse JSON. Also the exit codes of spheret-lm, the file names of a run folder and the
// metric names the trainer emits.
//
//   {"type":"metric","step":S,"name":"train/loss","value":V}          V null when not finite
//   {"type":"diag","step":S,"layer":L,"sublayer":"attn"|"mlp"|"model"|"dyadic",
//    "values":{"hidden_norm":..,"theta":..,...}}
//                      per-layer values, the one road for them from the trainer to the table
//                      (rules in protocol/diag_values.h): sublayer attn or mlp at layer L in
//                      [1, 4096], the depth over the loops; model at layer 0 for whole-model
//                      values of the step (delta_sum, ...); dyadic at layer m >= 1 for the budget
//                      of the updates m, ..., 2m - 1. At most 64 fields named [a-z0-9_]{1,40}.
//                      The flat form of earlier trainers (hidden_norm, theta, alpha, radial as
//                      top-level keys, layer and sublayer as for attn/mlp) still reads.
//   {"type":"checkpoint","step":S,"path":P}
//   {"type":"eval","step":S,"task":T,"metric":M,"value":V,"std_error":E}
//   {"type":"eval","step":S,"task":T,"metric":"error","value":null,"std_error":null,"error":M}
//                                                  an evaluation that failed (T "*": all tasks)
//   {"type":"done","step":S,"train_loss_avg":..,"val_loss":..,"val_ppl":..}
//   {"type":"diverged","step":S,"loss":..|null,"bound":..}
//   {"type":"stopped","step":S}
//   {"type":"prepared","path":P,"files":N,"train_tokens":N,"val_tokens":N}
//   {"type":"error","message":M}
//
// Numbers that are not finite are written as null (JSON has no NaN) and read back as NaN, with
// the step kept. Depends on nlohmann-json and absl::Status only (no gRPC): spheret-lm links it.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "protocol/diag_values.h"
#include "protocol/metric_catalog.h"

namespace spheret::protocol {

// Event types.
inline constexpr char kMetricType[] = "metric";
inline constexpr char kDiagType[] = "diag";
inline constexpr char kCheckpointType[] = "checkpoint";
inline constexpr char kEvalType[] = "eval";
inline constexpr char kDoneType[] = "done";
inline constexpr char kDivergedType[] = "diverged";
inline constexpr char kStoppedType[] = "stopped";
inline constexpr char kPreparedType[] = "prepared";
inline constexpr char kErrorType[] = "error";

// Exit codes of spheret-lm.
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;     // bad config, data, checkpoint, ... (an error event says)
inline constexpr int kExitUsage = 2;     // a bad command line
inline constexpr int kExitDiverged = 3;  // loss NaN/inf or above divergence_loss
inline constexpr int kExitStopped = 4;   // SIGTERM/SIGINT: checkpointed; --resume continues

// Files of a run folder (spheret-lm train --out DIR).
inline constexpr char kCheckpointFile[] = "ckpt.pt";
inline constexpr char kEventsFile[] = "events.jsonl";
inline constexpr char kConfigFile[] = "config.json";

// Metric names: protocol/metric_catalog.h.

struct MetricEvent {
  int64_t step = 0;
  std::string name;
  double value = 0;  // NaN when the trainer wrote null
};

// Per-layer values of one row (layer, sublayer) at one step: for attn and mlp rows the
// connection's geometry (hidden_norm, theta, alpha where the method has a step size, radial, and
// what the method adds, e.g. autonorm's gate_choice), and the block Jacobian's values on a block's
// mlp row; whole-model values on the model row (layer 0); dyadic budgets on dyadic rows.
struct DiagEvent {
  int64_t step = 0;
  int64_t layer = 0;
  std::string sublayer;  // kAttnSublayer, kMlpSublayer, kModelSublayer or kDyadicSublayer
  DiagValues values;     // unique names; NaN where the trainer wrote null
};

struct CheckpointEvent {
  int64_t step = 0;
  std::string path;
};

struct EvalEvent {  // a zero-shot score
  int64_t step = 0;
  std::string task, metric;
  double value = 0;
  double std_error = 0;    // NaN when unknown
  std::string error = "";  // metric kEvalErrorMetric: why the evaluation failed
};

struct DoneEvent {
  int64_t step = 0;
  double train_loss_avg = 0, val_loss = 0, val_ppl = 0;
};

struct DivergedEvent {
  int64_t step = 0;
  double loss = 0;  // NaN when not finite
  double bound = 0;
};

struct StoppedEvent {
  int64_t step = 0;
};

struct PreparedEvent {
  std::string path;
  int64_t files = 0, train_tokens = 0, val_tokens = 0;
};

struct ErrorEvent {
  std::string message;
};

using TrainerEvent = std::variant<MetricEvent, DiagEvent, CheckpointEvent, EvalEvent, DoneEvent,
                                  DivergedEvent, StoppedEvent, PreparedEvent, ErrorEvent>;

// The JSON object of `event` (non-finite numbers as null).
nlohmann::json ToJson(const TrainerEvent& event);

// The longest line (bytes, newline excluded) that is read as an event. The worker reads at most
// this much of a trainer's stdout line and stores an error event in place of a longer one; the
// parser refuses a longer line unread.
inline constexpr size_t kMaxEventLineBytes = 64 << 10;
// "a line of N bytes is over the limit of an event line (65536 bytes)".
absl::Status LineTooLong(size_t line_bytes);

// The largest step an event may carry, 2^53: every step is then exact as a double (plots, JSON
// readers) and sums of steps cannot overflow. A step below 0 is refused too.
inline constexpr int64_t kMaxStep = int64_t{1} << 53;
// "" when `step` is in [0, kMaxStep]; else why not, naming the range.
std::string StepRangeError(int64_t step);

// Parses one line into *event. InvalidArgument says why the line is not an event (longer than
// kMaxEventLineBytes, not JSON, no or unknown "type", a field missing or of the wrong type, a
// step outside [0, kMaxStep]),
// naming the field. Never throws.
absl::Status ParseTrainerEvent(const std::string& line, TrainerEvent* event);

// How a message echoes text it did not write: `text` whole when it has at most `max_bytes` bytes,
// else its first bytes (at most `max_bytes`, never splitting a UTF-8 sequence) and
// "... (N bytes)".
std::string Excerpt(std::string_view text, size_t max_bytes);

// The step an event belongs to, or -1 for events without one (prepared, error).
int64_t StepOf(const TrainerEvent& event);

}  // namespace spheret::protocol
