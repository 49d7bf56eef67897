// What bench_campaign_db's simulated trainer reports for one trial of the paper's campaign, as
// the worker daemon would send it (worker/daemon/batches.cc): metric rows, typed diag rows and
// eval events in EventBatches. Deterministic values shaped like a run's (a loss that falls, a
// geometry that drifts), so that the database has the size, the row counts and the curves of a
// real campaign. Pure: builds messages, no I/O.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "spheret/v1/workers.pb.h"

namespace spheret::bench {

// One trial as the generator writes it.
struct CampaignTrial {
  int64_t trial_id = 0;
  int32_t attempt = 0;
  std::string method;      // the method's id (config/method_registry.h)
  int64_t depth = 0;       // n_layer x loops: the attn and mlp rows 1..depth
  int64_t steps = 0;       // train/loss at steps 0 .. steps - 1
  int64_t interval = 250;  // val/loss, val/ppl, train/loss_avg and the geometry after every
                           // `interval` steps (at steps interval - 1, 2 interval - 1, ...)
  bool zero_shot = false;  // its last batch carries the zero-shot scores (the L models)
};

// The exported diag fields (protocol/metric_catalog.h) that `method` records
// (config/method_registry.h), on the attn and mlp rows (kLayer) and on the model row (kModel).
std::vector<std::string> CampaignLayerFields(const std::string& method);
std::vector<std::string> CampaignModelFields(const std::string& method);

// Rows of a trial as the store keeps them: metric rows (`scalars`), diag values
// (`layer_values`) and zero-shot scores (`evals`).
struct CampaignRows {
  int64_t metrics = 0, layer_values = 0, scores = 0;
};

// Appends to `batch` the events of steps [first, end): train/loss at each step and, at each
// interval's last step, val/loss, val/ppl, train/loss_avg, and one diag row per attn and mlp
// layer plus the model row. Returns the metric rows and diag values it added.
CampaignRows AddCampaignSteps(const CampaignTrial& trial, int64_t first, int64_t end,
                              v1::EventBatch* batch);

// Appends the zero-shot scores of the checkpoint at `step`: every task of ZeroShotTaskNames()
// with the metrics the scorer reports for it (worker/eval/task_table.cc), as eval events with
// their line's JSON. Returns the scores added.
int64_t AddZeroShotScores(const CampaignTrial& trial, int64_t step, int64_t first_seq,
                          v1::EventBatch* batch);

}  // namespace spheret::bench
