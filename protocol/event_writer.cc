#include "protocol/event_writer.h"

#include "absl/strings/str_cat.h"

namespace spheret::protocol {

void EventWriter::Emit(const TrainerEvent& event) {
  const std::string line =
      ToJson(event).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (record_) record_(line);
  EmitRaw(line);
}

void EventWriter::EmitRaw(const std::string& line) {
  *out_ << line << '\n';
  out_->flush();
}

void EventWriter::Metric(int64_t step, const std::string& name, double value) {
  Emit(MetricEvent{step, name, value});
}

void EventWriter::Error(const std::string& message) {
  if (message.size() <= kMaxErrorMessageBytes) {
    Emit(ErrorEvent{message});
    return;
  }
  Emit(ErrorEvent{absl::StrCat(message.substr(0, kMaxErrorMessageBytes), "... (", message.size(),
                               " bytes in all)")});
}

}  // namespace spheret::protocol
