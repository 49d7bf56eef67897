#include "worker/train/events.h"

#include "worker/train/event_history.h"

namespace spheret::train {

void EventWriter::Emit(const protocol::TrainerEvent& event) {
  const std::string line = protocol::ToJson(event).dump();
  if (history_ != nullptr) history_->Append(line);
  EmitRaw(line);
}

void EventWriter::EmitRaw(const std::string& line) {
  *out_ << line << '\n';
  out_->flush();
}

void EventWriter::Metric(int64_t step, const std::string& name, double value) {
  Emit(protocol::MetricEvent{step, name, value});
}

void EventWriter::Error(const std::string& message) { Emit(protocol::ErrorEvent{message}); }

}  // namespace spheret::train
