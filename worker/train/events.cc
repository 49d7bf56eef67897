#include "worker/train/events.h"

#include <c10/util/Exception.h>

namespace spheret::train {

std::string ExceptionMessage(const std::exception& error) {
  if (const auto* torch_error = dynamic_cast<const c10::Error*>(&error)) {
    return torch_error->what_without_backtrace();
  }
  return error.what();
}

}  // namespace spheret::train
