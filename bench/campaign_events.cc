#include "bench/campaign_events.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <utility>

#include "config/method_registry.h"
#include "config/train_config.h"
#include "protocol/diag_values.h"
#include "protocol/metric_catalog.h"

namespace spheret::bench {
namespace {

using protocol::Level;

std::vector<std::string> Recorded(const std::string& method, Level level) {
  std::vector<std::string> fields;
  for (const std::string& field : protocol::MetricNames({level}, /*exported_only=*/true)) {
    if (MethodRecords(method, field)) fields.push_back(field);
  }
  return fields;
}

// A training curve: falls from about 11 to about 3, a little noise, each trial its own level.
double LossAt(const CampaignTrial& trial, int64_t step) {
  const double level = 2.8 + 0.05 * static_cast<double>(trial.trial_id % 8);
  return level + 8.0 * std::exp(-static_cast<double>(step) / 1500.0) +
         0.03 * std::sin(0.37 * static_cast<double>(step));
}

// A geometry value that drifts over depth and training.
double GeometryAt(int64_t layer, int64_t step, size_t field, double offset) {
  return 0.5 + offset +
         0.25 * std::sin(0.11 * static_cast<double>(layer) + 1e-4 * static_cast<double>(step) +
                         0.7 * static_cast<double>(field));
}

void AddMetric(const char* name, int64_t step, double value, v1::EventBatch* batch) {
  v1::MetricRow* row = batch->add_metrics();
  row->set_name(name);
  row->set_step(step);
  row->set_value(value);
  row->set_wall_ms(1'800'000'000'000 + step * 900);  // about 0.9 s a step
}

int64_t AddDiagRow(int64_t step, int64_t layer, const char* sublayer,
                   const std::vector<std::string>& fields, double offset, v1::EventBatch* batch) {
  v1::DiagRow* row = batch->add_diags();
  row->set_step(step);
  row->set_layer(static_cast<int32_t>(layer));
  row->set_sublayer(sublayer);
  for (size_t f = 0; f < fields.size(); ++f) {
    v1::DiagValue* value = row->add_values();
    value->set_field(fields[f]);
    value->set_value(GeometryAt(layer, step, f, offset));
  }
  return static_cast<int64_t>(fields.size());
}

// The metrics the scorer reports per task (worker/eval/task_table.cc's AllTasks(); that library
// links LibTorch, so its table is mirrored here): multiple choice acc (and acc_norm where the
// task has it), LAMBADA perplexity and acc, WikiText its three perplexities.
std::vector<std::string> ScoreMetrics(const std::string& task) {
  if (task == "boolq" || task == "social_iqa" || task == "winogrande") return {"acc"};
  if (task == "lambada_openai") return {"perplexity", "acc"};
  if (task == "wikitext") return {"word_perplexity", "byte_perplexity", "bits_per_byte"};
  return {"acc", "acc_norm"};
}

}  // namespace

std::vector<std::string> CampaignLayerFields(const std::string& method) {
  return Recorded(method, Level::kLayer);
}

std::vector<std::string> CampaignModelFields(const std::string& method) {
  return Recorded(method, Level::kModel);
}

CampaignRows AddCampaignSteps(const CampaignTrial& trial, int64_t first, int64_t end,
                              v1::EventBatch* batch) {
  const std::vector<std::string> layer_fields = CampaignLayerFields(trial.method);
  const std::vector<std::string> model_fields = CampaignModelFields(trial.method);
  CampaignRows rows;
  for (int64_t step = first; step < end; ++step) {
    const double loss = LossAt(trial, step);
    AddMetric(protocol::kTrainLoss, step, loss, batch);
    ++rows.metrics;
    if ((step + 1) % trial.interval != 0) continue;
    AddMetric(protocol::kTrainLossAvg, step, loss, batch);
    AddMetric(protocol::kValLoss, step, loss + 0.02, batch);
    AddMetric(protocol::kValPpl, step, std::exp(loss + 0.02), batch);
    rows.metrics += 3;
    for (int64_t layer = 1; layer <= trial.depth; ++layer) {
      rows.layer_values +=
          AddDiagRow(step, layer, protocol::kAttnSublayer, layer_fields, 0.0, batch);
      rows.layer_values +=
          AddDiagRow(step, layer, protocol::kMlpSublayer, layer_fields, 0.1, batch);
    }
    if (!model_fields.empty()) {
      rows.layer_values += AddDiagRow(step, 0, protocol::kModelSublayer, model_fields, 0.2, batch);
    }
  }
  return rows;
}

int64_t AddZeroShotScores(const CampaignTrial& trial, int64_t step, int64_t first_seq,
                          v1::EventBatch* batch) {
  int64_t seq = first_seq;
  for (const std::string& task : ZeroShotTaskNames()) {
    for (const std::string& metric : ScoreMetrics(task)) {
      const bool accuracy = metric.rfind("acc", 0) == 0;
      const double value =
          accuracy ? 40.0 + static_cast<double>((trial.trial_id * 7 + seq) % 20) : 20.0 + seq;
      const double std_error = accuracy ? 0.5 : NAN;
      nlohmann::json line = {
          {"type", "eval"}, {"task", task}, {"metric", metric}, {"value", value}, {"step", step}};
      if (accuracy) line["std_error"] = std_error;
      v1::Event* event = batch->add_other();
      event->set_json(line.dump());
      event->set_seq(seq++);
      v1::EvalScore* score = event->mutable_eval();
      score->set_task(task);
      score->set_metric(metric);
      score->set_value(value);
      score->set_std_error(std_error);
      score->set_step(step);
    }
  }
  return seq - first_seq;
}

}  // namespace spheret::bench
