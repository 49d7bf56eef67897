// The shape of a sweep file checked before it is built into YAML nodes: its size, nesting depth,
// node count and longest scalar, each against SweepFileLimits. Internal to spheret_domain
// (ParseSweepSpec calls it first, so nothing later walks an unbounded document).
#pragma once

#include <string_view>

#include "absl/status/status.h"
#include "server/sweep/sweep_spec.h"

namespace spheret::sweep_yaml {

// OK, or InvalidArgument naming the limit, its value and (for a node) the line it was passed on:
//   "sweep file: 2000000 bytes, above the limit of 1048576"
//   "line 3: a value of 100000 bytes, above the limit of 4096 (starts '1111...')"
// YAML syntax errors are left to the parser that builds the nodes (OK is returned for them).
absl::Status CheckSweepFileShape(std::string_view yaml, const SweepFileLimits& limits);

}  // namespace spheret::sweep_yaml
