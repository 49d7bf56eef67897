// Linked instead of communicator_gloo.cc when gloo's headers were not found at build time.
#include "worker/train/communicator_backends.h"

namespace spheret::train {

absl::StatusOr<c10::intrusive_ptr<c10d::Backend>> MakeGlooBackend(
    const c10::intrusive_ptr<c10d::Store>&, const DistributedOptions&) {
  return absl::UnimplementedError(
      "this spheret-lm was built without c10d Gloo (install gloo's headers, e.g. Debian's "
      "libgloo-dev, and rebuild)");
}

}  // namespace spheret::train
