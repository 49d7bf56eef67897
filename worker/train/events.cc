#include "worker/train/events.h"

#include <cmath>

namespace spheret::train {

void EventWriter::Emit(const nlohmann::json& event) {
  *out_ << event.dump() << '\n';
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
