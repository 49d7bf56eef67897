#include "client/proto_text.h"

#include <google/protobuf/util/json_util.h>
#include <unistd.h>

#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "protocol/metric_catalog.h"

namespace spheret::client {

std::string TrialStateText(v1::TrialState state) {
  const std::string name = v1::TrialState_Name(state);
  const std::string prefix = "TRIAL_STATE_";
  return absl::StartsWith(name, prefix) ? name.substr(prefix.size()) : name;
}

std::string SweepStateText(v1::SweepState state) {
  const std::string name = v1::SweepState_Name(state);
  const std::string prefix = "SWEEP_STATE_";
  return absl::StartsWith(name, prefix) ? name.substr(prefix.size()) : name;
}

std::vector<v1::TrialState> AllTrialStates() {
  std::vector<v1::TrialState> states;
  for (int value = v1::TrialState_MIN; value <= v1::TrialState_MAX; ++value) {
    if (v1::TrialState_IsValid(value) && value != v1::TRIAL_STATE_UNSPECIFIED) {
      states.push_back(static_cast<v1::TrialState>(value));
    }
  }
  return states;
}

std::vector<std::string> RoleNames() {
  std::vector<std::string> names;
  for (int value = v1::Role_MIN; value <= v1::Role_MAX; ++value) {
    if (!v1::Role_IsValid(value) || value == v1::ROLE_UNSPECIFIED) continue;
    names.push_back(absl::AsciiStrToLower(
        absl::StripPrefix(v1::Role_Name(static_cast<v1::Role>(value)), "ROLE_")));
  }
  return names;
}

absl::StatusOr<v1::TrialState> ParseTrialStateText(const std::string& name) {
  std::string upper = absl::AsciiStrToUpper(name);
  if (!absl::StartsWith(upper, "TRIAL_STATE_")) upper = "TRIAL_STATE_" + upper;
  v1::TrialState state;
  if (!v1::TrialState_Parse(upper, &state) || state == v1::TRIAL_STATE_UNSPECIFIED) {
    std::vector<std::string> names;
    for (v1::TrialState known : AllTrialStates()) names.push_back(TrialStateText(known));
    return absl::InvalidArgumentError(
        absl::StrCat("--state '", name, "': expected one of ", absl::StrJoin(names, ", ")));
  }
  return state;
}

std::string ProtoJson(const google::protobuf::Message& message) {
  std::string text;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  (void)google::protobuf::util::MessageToJsonString(message, &text, options);
  return text;
}

TrialProgress ProgressOf(const v1::Trial& trial, const TrialConfig& config) {
  TrialProgress progress;
  progress.train_loss = progress.val_loss = std::nan("");
  double train_avg = std::nan("");
  for (const v1::MetricValue& value : trial.latest()) {
    progress.step = std::max(progress.step, value.step());  // the final eval is at max_iters
    if (value.name() == protocol::kTrainLoss) {
      progress.train_loss = value.value();
    } else if (value.name() == protocol::kTrainLossAvg) {
      train_avg = value.value();
    } else if (value.name() == protocol::kValLoss) {
      progress.val_loss = value.value();
    }
  }
  if (!std::isnan(train_avg)) progress.train_loss = train_avg;
  const nlohmann::json* max_iters = config.Find("max_iters");
  if (max_iters != nullptr && max_iters->is_number())
    progress.max_iters = max_iters->get<int64_t>();
  return progress;
}

bool IsTerminal(const std::ostream& out) { return &out == &std::cout && isatty(STDOUT_FILENO); }

}  // namespace spheret::client
