// Time as the coordinator sees it: milliseconds since the Unix epoch, from an injectable clock so
// that leases, back-off and aging are tested without sleeping.
#pragma once

#include <atomic>
#include <cstdint>

namespace spheret {

class Clock {
 public:
  virtual ~Clock() = default;
  // Milliseconds since the Unix epoch. Thread-safe.
  virtual int64_t NowMs() const = 0;
};

// The system clock.
class RealClock : public Clock {
 public:
  int64_t NowMs() const override;
};

// A clock that moves only when told to. Thread-safe.
class FakeClock : public Clock {
 public:
  explicit FakeClock(int64_t start_ms = 1'700'000'000'000) : now_ms_(start_ms) {}
  int64_t NowMs() const override { return now_ms_.load(); }
  void AdvanceMs(int64_t ms) { now_ms_ += ms; }
  void SetMs(int64_t ms) { now_ms_ = ms; }

 private:
  std::atomic<int64_t> now_ms_;
};

}  // namespace spheret
