// The coordinator's read paths (server/coordinator.h): what the API shows of sweeps, trials,
// results, logs and curves, read from the store's last committed state (no scheduler lock is
// taken). Thread-safe as the store is.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/coordinator_types.h"
#include "server/domain/records.h"
#include "server/store/store.h"
#include "server/sweep_watch.h"

namespace spheret {

class Reads {
 public:
  // `store` must outlive it.
  explicit Reads(store::Store* store) : store_(store) {}

  // Coordinator's reads of the same names.
  absl::StatusOr<SweepView> GetSweep(int64_t sweep_id);
  absl::StatusOr<std::vector<SweepView>> ListSweeps(int64_t after_sweep_id, int limit);
  absl::StatusOr<std::vector<TrialView>> ListTrials(const store::TrialQuery& query);
  absl::StatusOr<TrialLogs> GetTrialLogs(int64_t trial_id);
  absl::StatusOr<EventPage> TrialEvents(int64_t trial_id, const EventPageQuery& query);
  absl::StatusOr<std::vector<TrialResult>> ListResults(const store::TrialQuery& query);
  // Curves of more than `max_points` points are downsampled (server/curve_downsample.h); 0 keeps
  // every point. visit's second argument is the curve's point count before that.
  absl::Status ForEachCurve(
      int64_t sweep_id, const std::string& metric, int64_t max_points,
      const std::function<absl::Status(const TrialRecord&, const CurveRecord&, int64_t)>& visit);
  absl::Status ForEachLayerSeries(
      int64_t sweep_id, const LayerValueQuery& query,
      const std::function<absl::Status(const TrialRecord&, const std::vector<LayerSeries>&)>&
          visit);
  std::unique_ptr<SweepWatch> Watch(int64_t sweep_id);

 private:
  store::Store* store_;
};

}  // namespace spheret
