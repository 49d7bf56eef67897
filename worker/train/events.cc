#include "worker/train/events.h"

#include <cmath>

#include "worker/train/event_history.h"

namespace spheret::train {

void EventWriter::Emit(const nlohmann::json& event) {
  const std::string line = event.dump();
  if (history_ != nullptr) history_->Append(line);
  EmitRaw(line);
}

void EventWriter::EmitRaw(const std::string& line) {
  *out_ << line << '\n';
  out_->flush();
}

void EventWriter::Metric(int64_t step, const std::string& name, double value) {
  // JSON has no NaN/inf: a non-finite value is written as null.
  Emit({{"type", "metric"},
        {"step", step},
        {"name", name},
        {"value", std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr)}});
}

void EventWriter::Error(const std::string& message) {
  Emit({{"type", "error"}, {"message", message}});
}

}  // namespace spheret::train
