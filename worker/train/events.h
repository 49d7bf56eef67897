// The trainer's event writer (protocol/event_writer.h, torch-free so that spheret-prepare shares
// it) under its trainer name, and the message of a caught exception.
#pragma once

#include <exception>
#include <string>

#include "protocol/event_writer.h"

namespace spheret::train {

using protocol::EventWriter;
using protocol::kMaxErrorMessageBytes;

// The message of a caught exception: what(), for LibTorch's errors without their C++ backtrace.
std::string ExceptionMessage(const std::exception& error);

}  // namespace spheret::train
