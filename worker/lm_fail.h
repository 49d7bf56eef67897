// How a spheret-lm command ends in error: the message on stderr and as the run's error event, and
// the exit code the worker reads as an error (protocol/trainer_events.h). spheret-prepare, which
// shares `prepare`'s code, ends the same way under its own name.
#pragma once

#include <iostream>
#include <string>

#include "absl/status/status.h"
#include "protocol/event_writer.h"
#include "protocol/trainer_events.h"

namespace spheret::lm {

inline constexpr char kTrainerProgram[] = "spheret-lm";

inline int Fail(protocol::EventWriter& events, const std::string& message,
                const std::string& program = kTrainerProgram) {
  std::cerr << program << ": error: " << message << std::endl;
  events.Error(message);
  return protocol::kExitError;
}

inline int Fail(protocol::EventWriter& events, const absl::Status& status,
                const std::string& program = kTrainerProgram) {
  return Fail(events, std::string(status.message()), program);
}

}  // namespace spheret::lm
