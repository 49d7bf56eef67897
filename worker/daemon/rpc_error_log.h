// How the worker reports the gRPC errors of its calls to the coordinator (Register, Heartbeat,
// Acquire, IngestEvents, Finish): each as a warning naming the RPC, the status code and the
// message (cut to 300 bytes), the first of a kind (RPC and code) at once and a repeating one at
// most once per interval, with the count of those not logged in between. Thread-safe.
#pragma once

#include <grpcpp/support/status.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace spheret::worker {

class RpcErrorLog {
 public:
  explicit RpcErrorLog(int64_t interval_ms = 60'000) : interval_ms_(interval_ms) {}

  // Logs `status` (an error) of `rpc`, made at `now_ms` (any monotonic clock), unless one of its
  // kind was logged less than an interval ago; returns the line logged ("" when none).
  std::string Log(const std::string& rpc, const grpc::Status& status, int64_t now_ms);

  // The line Log writes for `status` of `rpc`, `repeats` errors of its kind after the last logged.
  static std::string Line(const std::string& rpc, const grpc::Status& status, int repeats);

 private:
  const int64_t interval_ms_;
  std::mutex mutex_;
  // (rpc, code) -> when it was last logged and how many of it came since.
  std::map<std::pair<std::string, int>, std::pair<int64_t, int>> seen_;
};

}  // namespace spheret::worker
