// Linked instead of communicator_gloo.cc when gloo's headers were not found at build time.
#include "worker/train/communicator.h"

namespace spheret::train {

std::unique_ptr<Communicator> JoinProcessGroup(const DistributedOptions&, std::string* error) {
  *error =
      "this spheret-lm was built without c10d Gloo support (install gloo's headers, e.g. "
      "Debian's libgloo-dev, and rebuild); WORLD_SIZE must be 1";
  return nullptr;
}

}  // namespace spheret::train
