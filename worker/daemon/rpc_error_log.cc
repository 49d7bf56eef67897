#include "worker/daemon/rpc_error_log.h"

#include <spdlog/spdlog.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "protocol/trainer_events.h"

namespace spheret::worker {

std::string RpcErrorLog::Line(const std::string& rpc, const grpc::Status& status, int repeats) {
  // gRPC's codes are absl's canonical codes.
  const std::string code =
      absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code()));
  return absl::StrCat(
      rpc, " failed: ", code, ": ", protocol::Excerpt(status.error_message(), 300),
      repeats > 0 ? absl::StrCat(" (", repeats, " more since the last report)") : "");
}

std::string RpcErrorLog::Log(const std::string& rpc, const grpc::Status& status, int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto key = std::make_pair(rpc, static_cast<int>(status.error_code()));
  auto found = seen_.find(key);
  if (found != seen_.end() && now_ms - found->second.first < interval_ms_) {
    ++found->second.second;
    return "";
  }
  const std::string line = Line(rpc, status, found != seen_.end() ? found->second.second : 0);
  seen_[key] = {now_ms, 0};
  spdlog::warn("{}", line);
  return line;
}

}  // namespace spheret::worker
