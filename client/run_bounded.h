// A piece of work run in a child process under a wall-clock limit that holds whatever the work
// does: `spheret sql` runs its query there, because some single SQLite instructions (instr() or
// replace() of a 16 MiB text, a LIKE over it) take hours and no progress handler runs inside them.
// Internal to spheret_client.
#pragma once

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace spheret::client {

// Runs `work` in a forked child and returns the text it produced, or its error (code and
// message). DeadlineExceeded when the child has not ended `limit` after the fork: it is killed
// (SIGKILL) and reaped. The child shares nothing with the caller after the fork but what `work`
// captured; it must not use threads the caller started.
absl::StatusOr<std::string> RunBounded(const std::function<absl::StatusOr<std::string>()>& work,
                                       absl::Duration limit);

}  // namespace spheret::client
