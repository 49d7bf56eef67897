// Trainer events: one JSON object per line on an output stream (stdout), each with a "type":
//   {"type":"metric","step":S,"name":"train/loss","value":V}
//   {"type":"diag","step":S,"layer":L,"sublayer":"attn"|"mlp","hidden_norm":..,"theta":..,
//    "alpha":..|null,"radial":..}
//   {"type":"done",...}, {"type":"diverged",...}, {"type":"error","message":..}
// Each line is written whole and flushed, so a reader never sees half an event. Thread-compatible.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

namespace spheret::train {

class EventHistory;

class EventWriter {
 public:
  explicit EventWriter(std::ostream* out) : out_(out) {}
  void Emit(const nlohmann::json& event);
  void Metric(int64_t step, const std::string& name, double value);
  void Error(const std::string& message);
  // Writes an already serialized event line as it is (a replayed one); not recorded again.
  void EmitRaw(const std::string& line);
  // Also records every emitted event in `history` (not owned; null to stop).
  void RecordTo(EventHistory* history) { history_ = history; }

 private:
  std::ostream* out_;
  EventHistory* history_ = nullptr;
};

}  // namespace spheret::train
