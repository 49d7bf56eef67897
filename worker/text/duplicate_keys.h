// JSON that names a key twice in one object. nlohmann's parser keeps the last value without a
// word; formats that forbid duplicates (a safetensors header, spheret's meta.json) refuse the
// text instead, naming the key. Pass Callback() to nlohmann::json::parse, then ask duplicate().
#pragma once

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

namespace spheret::train {

class DuplicateKeyFinder {
 public:
  DuplicateKeyFinder() = default;
  DuplicateKeyFinder(const DuplicateKeyFinder&) = delete;
  DuplicateKeyFinder& operator=(const DuplicateKeyFinder&) = delete;

  // A parser callback that records the first key an object names twice (at any depth); it keeps
  // every value, so the parse gives what it would without it. Valid while this finder lives.
  nlohmann::json::parser_callback_t Callback();
  // That key, cut to 64 bytes (base/text_prefix.h); "" when every object's keys are unique.
  const std::string& duplicate() const { return duplicate_; }

 private:
  std::vector<std::set<std::string>> open_;  // the keys of each object being parsed, innermost last
  std::string duplicate_;
};

}  // namespace spheret::train
