// Small helpers between the API's messages and the CLI's text: state names, JSON, a trial's
// progress.
#pragma once

#include <google/protobuf/message.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "config/trial_config.h"
#include "spheret/v1/types.pb.h"

namespace spheret::client {

// A state's name as TrialStateName (protocol/trial_states.h) spells it: the enum name without
// its prefix.
std::string TrialStateText(v1::TrialState state);
// Every trial state of the API (UNSPECIFIED aside), in the enum's order.
std::vector<v1::TrialState> AllTrialStates();
// The names of the API's roles (v1::Role lowercased without its prefix), in the enum's order.
std::vector<std::string> RoleNames();
std::string SweepStateText(v1::SweepState state);
// Accepts a state's name in any case, with or without its TRIAL_STATE_ prefix ("running",
// "trial_state_running").
absl::StatusOr<v1::TrialState> ParseTrialStateText(const std::string& name);

// The message as JSON with the proto field names.
std::string ProtoJson(const google::protobuf::Message& message);
template <typename M>
std::string ProtoJsonArray(const std::vector<M>& messages) {
  std::string out = "[";
  for (size_t i = 0; i < messages.size(); ++i) out += (i ? ",\n" : "\n") + ProtoJson(messages[i]);
  return out + (messages.empty() ? "]" : "\n]");
}

// Where a trial is: its latest step, losses (NaN when unknown) and max_iters from `config` (the
// trial's config, parsed once by the caller).
struct TrialProgress {
  int64_t step = -1;
  int64_t max_iters = 0;
  double train_loss = 0;  // train/loss_avg, else train/loss
  double val_loss = 0;
};
TrialProgress ProgressOf(const v1::Trial& trial, const TrialConfig& config);

// Whether `out` is std::cout and that is a terminal.
bool IsTerminal(const std::ostream& out);

}  // namespace spheret::client
