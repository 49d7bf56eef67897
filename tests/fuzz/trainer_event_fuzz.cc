// Fuzz target: one trainer stdout line through the event parser the worker runs on every line
// (protocol/trainer_events.h). Every line is an event or a reason; an event written back and
// parsed again is the same event.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "protocol/trainer_events.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string line(reinterpret_cast<const char*>(data), size);
  spheret::protocol::TrainerEvent event;
  const absl::Status refused = spheret::protocol::ParseTrainerEvent(line, &event);
  if (!refused.ok()) return 0;
  const std::string written = spheret::protocol::ToJson(event).dump(
      -1, ' ', false, nlohmann::json::error_handler_t::replace);
  spheret::protocol::TrainerEvent again;
  if (!spheret::protocol::ParseTrainerEvent(written, &again).ok()) std::abort();
  if (again.index() != event.index()) std::abort();
  if (spheret::protocol::StepOf(again) != spheret::protocol::StepOf(event)) std::abort();
  return 0;
}
