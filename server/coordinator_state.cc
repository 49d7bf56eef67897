#include "server/coordinator_state.h"

#include <chrono>

namespace spheret {

void CoordinatorState::Touch(int64_t sweep_id) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    ++versions[sweep_id];
  }
  changed.notify_all();
}

int64_t CoordinatorState::WaitForChange(int64_t sweep_id, int64_t seen, int64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(mutex);
  changed.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                   [&] { return versions[sweep_id] > seen; });
  return versions[sweep_id];
}

}  // namespace spheret
