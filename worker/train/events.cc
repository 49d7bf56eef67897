#include "worker/train/events.h"

#include <c10/util/Exception.h>

#include "absl/strings/str_cat.h"
#include "worker/train/event_history.h"

namespace spheret::train {

std::string ExceptionMessage(const std::exception& error) {
  if (const auto* torch_error = dynamic_cast<const c10::Error*>(&error)) {
    return torch_error->what_without_backtrace();
  }
  return error.what();
}

void EventWriter::Emit(const protocol::TrainerEvent& event) {
  const std::string line =
      protocol::ToJson(event).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
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

void EventWriter::Error(const std::string& message) {
  if (message.size() <= kMaxErrorMessageBytes) {
    Emit(protocol::ErrorEvent{message});
    return;
  }
  Emit(protocol::ErrorEvent{absl::StrCat(message.substr(0, kMaxErrorMessageBytes), "... (",
                                         message.size(), " bytes in all)")});
}

}  // namespace spheret::train
