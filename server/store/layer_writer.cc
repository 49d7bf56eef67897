// Per-layer value ingestion on the writer thread: one layer_values row per (field, layer,
// sublayer, step) of a diag row, idempotent per attempt, and the superseding of an older
// attempt's values of a field from the first step the resumed attempt reports.
#include <algorithm>
#include <unordered_map>

#include "base/status_macros.h"
#include "server/store/sqlite_rows.h"

namespace spheret::store {

absl::StatusOr<int64_t> LayerValueWriter::FieldId(Database& db, const std::string& name) {
  auto found = field_ids_.find(name);
  if (found != field_ids_.end()) return found->second;
  SPHERET_ASSIGN_OR_RETURN(
      Statement * insert,
      db.Prepare("INSERT INTO diag_fields(name) VALUES (?1) ON CONFLICT(name) DO NOTHING"));
  SPHERET_RETURN_IF_ERROR(insert->Bind(1, name).Run());
  SPHERET_ASSIGN_OR_RETURN(Statement * select,
                           db.Prepare("SELECT field_id FROM diag_fields WHERE name = ?1"));
  select->Bind(1, name);
  SPHERET_ASSIGN_OR_RETURN(bool row, select->Step());
  const int64_t id = row ? select->Int(0) : 0;
  select->Reset();
  if (!row) return absl::InternalError("diag field '" + name + "' vanished");
  pending_ids_.emplace_back(name, id);  // cached once the batch succeeded (Commit)
  return id;
}

absl::Status LayerValueWriter::Supersede(Database& db, int64_t trial_id, int attempt,
                                         int64_t field_id, int64_t from_step) {
  if (attempt <= 1 || superseded_.count({trial_id, attempt, field_id}) != 0) {
    return absl::OkStatus();
  }
  SPHERET_ASSIGN_OR_RETURN(
      Statement * update,
      db.Prepare("UPDATE layer_values SET superseded = 1 WHERE trial_id = ?1 AND field_id = ?2 "
                 "AND step >= ?3 AND attempt < ?4 AND superseded = 0"));
  SPHERET_RETURN_IF_ERROR(
      update->Bind(1, trial_id).Bind(2, field_id).Bind(3, from_step).Bind(4, attempt).Run());
  pending_superseded_.emplace_back(trial_id, attempt, field_id);
  return absl::OkStatus();
}

absl::Status LayerValueWriter::Append(Database& db, const EventBatchRecord& batch) {
  pending_ids_.clear();
  pending_superseded_.clear();
  if (batch.diags.empty()) return absl::OkStatus();
  SPHERET_ASSIGN_OR_RETURN(
      Statement * insert,
      db.Prepare("INSERT INTO layer_values(trial_id, field_id, sublayer, layer, step, attempt, "
                 "value) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT DO NOTHING"));
  std::unordered_map<int64_t, int64_t> first_step;  // field_id -> its first step in the batch
  for (const DiagRecord& diag : batch.diags) {
    for (const auto& [field, value] : diag.values) {
      SPHERET_ASSIGN_OR_RETURN(int64_t field_id, FieldId(db, field));
      auto [at, added] = first_step.emplace(field_id, diag.step);
      if (!added) at->second = std::min(at->second, diag.step);
      insert->Bind(1, batch.trial_id).Bind(2, field_id).Bind(3, diag.sublayer);
      insert->Bind(4, diag.layer).Bind(5, diag.step).Bind(6, batch.attempt).Bind(7, value);
      SPHERET_RETURN_IF_ERROR(insert->Run());
    }
  }
  for (const auto& [field_id, step] : first_step) {
    SPHERET_RETURN_IF_ERROR(Supersede(db, batch.trial_id, batch.attempt, field_id, step));
  }
  return absl::OkStatus();
}

void LayerValueWriter::Commit() {
  for (auto& [name, id] : pending_ids_) field_ids_[name] = id;
  for (auto& key : pending_superseded_) superseded_.insert(key);
}

void LayerValueWriter::Forget() {
  field_ids_.clear();
  superseded_.clear();
}

}  // namespace spheret::store
