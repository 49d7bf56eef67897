// c10d's NCCL backend, for CUDA training. Built with a CUDA LibTorch when nccl.h is found; else
// communicator_nccl_absent.cc.
#include <c10/cuda/CUDAFunctions.h>

#include <chrono>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include "worker/train/communicator_backends.h"

namespace spheret::train {

absl::StatusOr<c10::intrusive_ptr<c10d::Backend>> MakeNcclBackend(
    const c10::intrusive_ptr<c10d::Store>& store, const DistributedOptions& options) {
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(options.local_rank));
  auto nccl_options = c10d::ProcessGroupNCCL::Options::create();
  nccl_options->timeout = std::chrono::milliseconds(1000LL * options.timeout_seconds);
  return c10::intrusive_ptr<c10d::Backend>(c10::make_intrusive<c10d::ProcessGroupNCCL>(
      store, options.rank, options.world_size, nccl_options));
}

}  // namespace spheret::train
