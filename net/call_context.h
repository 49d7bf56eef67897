// How every client call of the CLI and the worker daemon carries its credentials and deadline, so
// that the bearer-token header and the deadline are written in one place.
#pragma once

#include <grpcpp/grpcpp.h>

#include <string>

#include "absl/time/time.h"

namespace spheret::net {

struct CallOptions {
  // Sent as "authorization: Bearer <token>"; "" sends no authorization header.
  std::string token;
  // The call's deadline from now; absl::InfiniteDuration() sets none (a stream that lasts).
  absl::Duration timeout = absl::InfiniteDuration();
  // Wait (within the deadline) for the channel to connect instead of failing at once while it is
  // between reconnect attempts: a returning coordinator is reached as soon as it is back.
  bool wait_for_ready = false;
};

// Sets up `context` (not yet used for a call) for one call as `options` say.
void PrepareCall(grpc::ClientContext* context, const CallOptions& options);

}  // namespace spheret::net
