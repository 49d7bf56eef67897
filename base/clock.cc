#include "base/clock.h"

#include <chrono>

namespace spheret {
namespace {

int64_t Milliseconds(std::chrono::nanoseconds duration) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(duration).count();
}

}  // namespace

int64_t RealClock::NowMs() const {
  return Milliseconds(std::chrono::system_clock::now().time_since_epoch());
}

SteadyClock::SteadyClock()
    : start_ms_(RealClock().NowMs()), start_(std::chrono::steady_clock::now()) {}

int64_t SteadyClock::NowMs() const {
  return start_ms_ + Milliseconds(std::chrono::steady_clock::now() - start_);
}

}  // namespace spheret
