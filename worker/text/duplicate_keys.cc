#include "worker/text/duplicate_keys.h"

#include "base/text_prefix.h"

namespace spheret::train {

nlohmann::json::parser_callback_t DuplicateKeyFinder::Callback() {
  open_.clear();
  duplicate_.clear();
  return [this](int /*depth*/, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (event == Event::object_start) {
      open_.emplace_back();
    } else if (event == Event::object_end && !open_.empty()) {
      open_.pop_back();
    } else if (event == Event::key && !open_.empty() && duplicate_.empty() &&
               !open_.back().insert(parsed.get<std::string>()).second) {
      duplicate_ = TextPrefix(parsed.get<std::string>());
    }
    return true;
  };
}

}  // namespace spheret::train
