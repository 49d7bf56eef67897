// Fuzz target: a sweep file through the parser, the validator and a bounded grid expansion (what
// `spheret submit` and the coordinator's SubmitSweep run on text a user or a client sends).
// Every input must come back as a spec or an InvalidArgument; nothing may throw or crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/sweep/sweep_expand.h"
#include "server/sweep/sweep_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view yaml(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<spheret::SweepSpec> spec = spheret::ParseSweepSpec(yaml);
  if (!spec.ok()) {
    if (spec.status().code() != absl::StatusCode::kInvalidArgument) std::abort();
    return 0;
  }
  spheret::SweepLimits limits;
  limits.max_trials = 64;  // the expansion's bound is part of what is fuzzed
  absl::StatusOr<std::vector<spheret::TrialSpec>> trials = spheret::ExpandSweep(*spec, limits);
  if (trials.ok() && (trials->empty() || trials->size() > 64)) std::abort();
  return 0;
}
