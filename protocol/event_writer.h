// Writes trainer events (protocol/trainer_events.h) as JSON lines on an output stream (stdout).
// Each line is written whole and flushed, so a reader never sees half an event. Text that is not
// valid UTF-8 is written with U+FFFD in place of the bad bytes (never an exception). No LibTorch:
// spheret-prepare writes its events with it too. Thread-compatible.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>

#include "protocol/trainer_events.h"

namespace spheret::protocol {

// Error events carry at most this many bytes of message (a longer one is cut, its size said).
inline constexpr size_t kMaxErrorMessageBytes = 4096;

class EventWriter {
 public:
  explicit EventWriter(std::ostream* out) : out_(out) {}
  void Emit(const TrainerEvent& event);
  void Metric(int64_t step, const std::string& name, double value);
  // An error event; `message` cut to kMaxErrorMessageBytes.
  void Error(const std::string& message);
  // Writes an already serialized event line as it is (a replayed one); not recorded again.
  void EmitRaw(const std::string& line);
  // Also passes every emitted line to `record` (a run's event history); an empty one stops.
  void RecordTo(std::function<void(const std::string&)> record) { record_ = std::move(record); }

 private:
  std::ostream* out_;
  std::function<void(const std::string&)> record_;
};

}  // namespace spheret::protocol
