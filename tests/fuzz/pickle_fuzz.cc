// Fuzz target: the pickle reader behind a data set's meta.pkl (worker/text/pickle.h). Any bytes
// give a JSON value or a message; none may crash, hang or execute anything.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "worker/text/pickle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nlohmann::json value;
  spheret::train::ReadPickle(std::string_view(reinterpret_cast<const char*>(data), size), &value)
      .IgnoreError();
  return 0;
}
