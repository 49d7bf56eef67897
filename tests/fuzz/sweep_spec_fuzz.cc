// Fuzz target: a sweep file through the parser, the validator and a bounded grid expansion (what
// `spheret submit` and the coordinator's SubmitSweep run on text a user or a client sends).
// Every input must come back as a spec or an InvalidArgument; nothing may throw or crash. A spec
// that parsed keeps the sampler's bounds (issue 44, item 11): a uniform axis's width and a
// loguniform axis's log width are finite, int_uniform's bounds within 2^53; and an expansion
// that kept fewer trials than it drew says so in a notice.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "server/sweep/sweep_expand.h"
#include "server/sweep/sweep_search.h"
#include "server/sweep/sweep_spec.h"

namespace {

// Whether the parsed sampled axes keep the bounds sweep_search.h promises.
bool SamplersInBounds(const spheret::SweepSpec& spec) {
  constexpr auto kLimit = static_cast<double>(spheret::sweep_search::kMaxSampledInteger);
  for (const spheret::ParameterAxis& axis : spec.parameters) {
    const spheret::Sampler& s = axis.sampler;
    if (s.distribution.empty() || s.distribution == "choice") continue;
    if (!(s.min < s.max)) return false;
    if (s.distribution == "uniform" && !std::isfinite(s.max - s.min)) return false;
    if (s.distribution == "loguniform" &&
        !(s.min > 0 && std::isfinite(std::log(s.max) - std::log(s.min)))) {
      return false;
    }
    if (s.distribution == "int_uniform" && (s.min < -kLimit || s.max > kLimit)) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view yaml(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<spheret::SweepSpec> spec = spheret::ParseSweepSpec(yaml);
  if (!spec.ok()) {
    if (spec.status().code() != absl::StatusCode::kInvalidArgument) std::abort();
    return 0;
  }
  if (!SamplersInBounds(*spec)) std::abort();
  spheret::SweepLimits limits;
  limits.max_trials = 64;  // the expansion's bound is part of what is fuzzed
  std::vector<std::string> notices;
  absl::StatusOr<std::vector<spheret::TrialSpec>> trials =
      spheret::ExpandSweep(*spec, limits, nullptr, &notices);
  if (trials.ok() && (trials->empty() || trials->size() > 64)) std::abort();
  // Without a notice, a sampled sweep has its samples' worth of trials at least.
  const auto drawn = static_cast<size_t>(spec->samples) * spec->seeds.size();
  if (trials.ok() && spec->samples > 0 && notices.empty() && trials->size() < drawn) std::abort();
  return 0;
}
