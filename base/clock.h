// Time as the coordinator sees it: milliseconds since the Unix epoch, from an injectable clock so
// that leases, back-off and aging are tested without sleeping.
#pragma once

#include <atomic>
#include <chrono>
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

// The system clock as it read at construction, advanced since by the monotonic clock: it never
// steps back or jumps when someone sets the wall clock, so a lease or a back-off measured with it
// lasts as long as it should within one process. Its values stay close to the Unix epoch's (they
// drift from the wall clock only by the steps the wall clock took since), so they can be stored
// and shown as dates. Thread-safe.
class SteadyClock : public Clock {
 public:
  SteadyClock();
  int64_t NowMs() const override;

 private:
  const int64_t start_ms_;  // the system clock at construction
  const std::chrono::steady_clock::time_point start_;
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
