// Linked instead of communicator_nccl.cc without a CUDA LibTorch or nccl.h.
#include "worker/train/communicator_backends.h"

namespace spheret::train {

absl::StatusOr<c10::intrusive_ptr<c10d::Backend>> MakeNcclBackend(
    const c10::intrusive_ptr<c10d::Store>&, const DistributedOptions&) {
  return absl::UnimplementedError(
      "this spheret-lm was built without NCCL (it needs a CUDA LibTorch and nccl.h)");
}

}  // namespace spheret::train
