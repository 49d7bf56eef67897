// Mapping between the proto messages of spheret.v1 and the domain records, and absl::Status to
// grpc::Status (the one place that does it).
#pragma once

#include <grpcpp/grpcpp.h>

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "server/domain/records.h"
#include "spheret/v1/sweeps.pb.h"
#include "spheret/v1/types.pb.h"
#include "spheret/v1/workers.pb.h"

namespace spheret::rpc {

// The longest status message the server sends (longer ones are cut, with their length noted).
inline constexpr size_t kMaxStatusMessageBytes = 2048;

// The same code; the message cut to kMaxStatusMessageBytes.
grpc::Status ToGrpcStatus(const absl::Status& status);

v1::TrialState ToProto(TrialState state);
// UNSPECIFIED maps to nullopt.
std::optional<TrialState> FromProto(v1::TrialState state);
v1::SweepState ToProto(SweepState state);

void FillTrial(const TrialRecord& trial, const std::map<std::string, MetricSummary>& summaries,
               v1::Trial* out);
// Every field but spec_yaml (which only GetSweep with include_spec returns).
void FillSweep(const SweepRecord& sweep, const std::map<std::string, int64_t>& counts,
               v1::Sweep* out);
// A result row: the trial, the summaries of `metrics` it has, and its zero-shot scores.
void FillResultRow(const TrialRecord& trial, const std::map<std::string, MetricSummary>& summaries,
                   const std::vector<EvalRecord>& evals, const std::vector<std::string>& metrics,
                   v1::ResultRow* out);
void FillAttempt(const AttemptRecord& attempt, v1::AttemptInfo* out);
EventBatchRecord FromProto(const v1::EventBatch& batch);
// The query of a StreamLayerValues request (max_layer and max_step 0: no upper bound).
LayerValueQuery FromProto(const v1::StreamLayerValuesRequest& request);
void FillLayerSeries(const LayerSeries& series, v1::LayerSeries* out);

}  // namespace spheret::rpc
