// Writes trainer events (protocol/trainer_events.h) as JSON lines on an output stream (stdout).
// Each line is written whole and flushed, so a reader never sees half an event.
// Thread-compatible.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "protocol/trainer_events.h"

namespace spheret::train {

class EventHistory;

class EventWriter {
 public:
  explicit EventWriter(std::ostream* out) : out_(out) {}
  void Emit(const protocol::TrainerEvent& event);
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
