// How a spheret-lm command ends in error: the message on stderr and as the run's error event, and
// the exit code the worker reads as an error (protocol/trainer_events.h).
#pragma once

#include <iostream>
#include <string>

#include "absl/status/status.h"
#include "protocol/trainer_events.h"
#include "worker/train/events.h"

namespace spheret::lm {

inline int Fail(train::EventWriter& events, const std::string& message) {
  std::cerr << "spheret-lm: error: " << message << std::endl;
  events.Error(message);
  return protocol::kExitError;
}

inline int Fail(train::EventWriter& events, const absl::Status& status) {
  return Fail(events, std::string(status.message()));
}

}  // namespace spheret::lm
