// Fuzz target: the JSONL input of `spheret-lm prepare` (worker/text/jsonl.h): the line reader
// with a small line limit (so inputs of a few KB reach the over-long class) and the text field
// taken from each line. Any bytes give documents or a bounded message; none may crash or hang,
// and every document taken is valid UTF-8.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "worker/text/jsonl.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  spheret::train::JsonlReader reader(&in, "fuzz.jsonl", 1024);
  std::string line, text;
  for (;;) {
    bool done = false;
    const absl::Status read = reader.Next(&line, &done);
    if (!read.ok()) {
      if (read.message().size() > 300) std::abort();  // messages echo no input
      return 0;
    }
    if (done) return 0;
    const absl::Status parsed = spheret::train::ReadJsonlText(line, "text", &text);
    if (parsed.message().size() > 300) std::abort();
    if (parsed.ok()) (void)nlohmann::json(text).dump();  // throws (a finding) on invalid UTF-8
  }
}
