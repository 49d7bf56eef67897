// Writes trainer events (protocol/trainer_events.h) as JSON lines on an output stream (stdout).
// Each line is written whole and flushed, so a reader never sees half an event. Text that is not
// valid UTF-8 is written with U+FFFD in place of the bad bytes (never an exception).
// Thread-compatible.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <ostream>
#include <string>

#include "protocol/trainer_events.h"

namespace spheret::train {

class EventHistory;

// Error events carry at most this many bytes of message (a longer one is cut, its size said).
inline constexpr size_t kMaxErrorMessageBytes = 4096;

// The message of a caught exception: what(), for LibTorch's errors without their C++ backtrace.
std::string ExceptionMessage(const std::exception& error);

class EventWriter {
 public:
  explicit EventWriter(std::ostream* out) : out_(out) {}
  void Emit(const protocol::TrainerEvent& event);
  void Metric(int64_t step, const std::string& name, double value);
  // An error event; `message` cut to kMaxErrorMessageBytes.
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
