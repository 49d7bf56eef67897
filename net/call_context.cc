#include "net/call_context.h"

#include <chrono>

namespace spheret::net {

void PrepareCall(grpc::ClientContext* context, const CallOptions& options) {
  if (options.timeout != absl::InfiniteDuration()) {
    context->set_deadline(std::chrono::system_clock::now() +
                          absl::ToChronoMilliseconds(options.timeout));
  }
  if (options.wait_for_ready) context->set_wait_for_ready(true);
  if (!options.token.empty()) context->AddMetadata("authorization", "Bearer " + options.token);
}

}  // namespace spheret::net
