#include "worker/daemon/batches.h"

#include <variant>

#include "absl/strings/str_cat.h"

namespace spheret::worker {
namespace {

// The bytes a repeated field's element adds to its message: the element, its tag and length.
size_t Added(const google::protobuf::Message& element) { return element.ByteSizeLong() + 8; }

size_t AddStored(const protocol::TrainerEvent& event, const std::string& line, int64_t seq,
                 v1::EventBatch* batch) {
  v1::Event* other = batch->add_other();
  other->set_json(line);
  other->set_seq(seq);
  if (const auto* eval = std::get_if<protocol::EvalEvent>(&event)) {
    v1::EvalScore* row = other->mutable_eval();
    row->set_step(eval->step);
    row->set_task(eval->task);
    row->set_metric(eval->metric);
    row->set_value(eval->value);
    row->set_std_error(eval->std_error);
    row->set_error(eval->error);
  }
  return Added(*other);
}

// A diag event as the batch's typed row (its line is not stored: the values are the record).
size_t AddDiag(const protocol::DiagEvent& diag, v1::EventBatch* batch) {
  v1::DiagRow* row = batch->add_diags();
  row->set_step(diag.step);
  row->set_layer(static_cast<int32_t>(diag.layer));  // bounded by the parser (diag_values.h)
  row->set_sublayer(diag.sublayer);
  for (const auto& [field, value] : diag.values) {
    v1::DiagValue* out = row->add_values();
    out->set_field(field);
    out->set_value(value);
  }
  return Added(*row);
}

}  // namespace

size_t AddToBatch(const protocol::TrainerEvent& event, const std::string& line, int64_t seq,
                  int64_t wall_ms, v1::EventBatch* batch) {
  if (const auto* metric = std::get_if<protocol::MetricEvent>(&event)) {
    v1::MetricRow* row = batch->add_metrics();
    row->set_name(metric->name);
    row->set_step(metric->step);
    row->set_value(metric->value);
    row->set_wall_ms(wall_ms);
    return Added(*row);
  }
  if (const auto* checkpoint = std::get_if<protocol::CheckpointEvent>(&event)) {
    batch->set_checkpoint_step(checkpoint->step);
    batch->set_checkpoint_path(checkpoint->path);
    return checkpoint->path.size() + 16;
  }
  if (const auto* diag = std::get_if<protocol::DiagEvent>(&event)) return AddDiag(*diag, batch);
  return AddStored(event, line, seq, batch);
}

size_t AddOverlongLine(const std::string& prefix, size_t line_bytes, int64_t seq,
                       v1::EventBatch* batch) {
  const protocol::ErrorEvent error{absl::StrCat(
      "a stdout line of ", line_bytes, " bytes is over the limit of an event line (",
      protocol::kMaxEventLineBytes,
      " bytes) and was not read; it began: ", absl::string_view(prefix).substr(0, 200), "...")};
  // The excerpt may hold invalid UTF-8 (or a cut sequence): written as U+FFFD.
  const std::string line =
      protocol::ToJson(error).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return AddStored(error, line, seq, batch);
}

absl::StatusOr<std::vector<v1::EventBatch>> SplitBatch(const v1::EventBatch& batch,
                                                       size_t max_bytes) {
  if (batch.ByteSizeLong() <= max_bytes) return std::vector<v1::EventBatch>{batch};
  std::vector<v1::EventBatch> parts;
  v1::EventBatch part;
  size_t bytes = 0;
  // Each part keeps room for the ids and the checkpoint, which only the last one carries.
  const size_t fixed = 32 + batch.checkpoint_path().size();
  auto make_room = [&](size_t added) {
    if (bytes + added > max_bytes && BatchItems(part) > 0) {
      parts.push_back(std::move(part));
      part = v1::EventBatch();
    }
    if (BatchItems(part) == 0) {
      part.set_trial_id(batch.trial_id());
      part.set_attempt(batch.attempt());
      bytes = fixed;
    }
    bytes += added;
    return bytes <= max_bytes;
  };
  auto too_large = [&](size_t added) {
    return absl::ResourceExhaustedError(
        absl::StrCat("trial ", batch.trial_id(), " attempt ", batch.attempt(), ": a row of ", added,
                     " bytes is larger than max of one event batch (", max_bytes, " bytes)"));
  };
  for (const v1::MetricRow& row : batch.metrics()) {
    if (!make_room(Added(row))) return too_large(Added(row));
    *part.add_metrics() = row;
  }
  for (const v1::DiagRow& row : batch.diags()) {
    if (!make_room(Added(row))) return too_large(Added(row));
    *part.add_diags() = row;
  }
  for (const v1::Event& row : batch.other()) {
    if (!make_room(Added(row))) return too_large(Added(row));
    *part.add_other() = row;
  }
  make_room(0);  // the ids, when no row came before
  part.set_checkpoint_step(batch.checkpoint_step());
  part.set_checkpoint_path(batch.checkpoint_path());
  parts.push_back(std::move(part));
  return parts;
}

int BatchItems(const v1::EventBatch& batch) {
  return batch.metrics_size() + batch.other_size() + batch.diags_size() +
         (batch.checkpoint_step() > 0 ? 1 : 0);
}

SpoolItem FinishItem(const std::string& worker_id, int64_t trial_id, int attempt,
                     v1::TrialState outcome, int exit_code, const std::string& stderr_tail) {
  SpoolItem item;
  item.is_finish = true;
  item.finish.set_worker_id(worker_id);
  item.finish.set_trial_id(trial_id);
  item.finish.set_attempt(attempt);
  item.finish.set_outcome(outcome);
  item.finish.set_exit_code(exit_code);
  item.finish.set_stderr_tail(stderr_tail);
  return item;
}

}  // namespace spheret::worker
