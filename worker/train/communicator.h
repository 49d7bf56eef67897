// Data parallelism across processes over a c10d process group (Gloo on CPU, NCCL on CUDA), with
// torchrun-style rendezvous: WORLD_SIZE ranks meet at MASTER_ADDR:MASTER_PORT, rank 0 hosting the
// TCP store.
#pragma once

#include <torch/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace spheret::train {

enum class CollectiveBackend { kGloo, kNccl };

struct DistributedOptions {
  CollectiveBackend backend = CollectiveBackend::kGloo;  // kNccl for CUDA tensors.
  int rank = 0;                                          // RANK
  int world_size = 1;                                    // WORLD_SIZE
  int local_rank = 0;                                    // LOCAL_RANK
  std::string master_addr = "127.0.0.1";                 // MASTER_ADDR
  int master_port = 29500;                               // MASTER_PORT
  int timeout_seconds = 300;                             // Rendezvous and collective timeout.
  // Network interface for Gloo's traffic (GLOO_SOCKET_IFNAME). Empty: loopback when master_addr
  // is a loopback address (one machine), else the address the host name resolves to.
  std::string network_interface;
};

// Collectives over the ranks of one trial. Not thread-safe; every rank must make the same calls in
// the same order.
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // Overwrites each tensor with rank 0's value.
  virtual void Broadcast(const std::vector<torch::Tensor>& tensors) = 0;
  // Replaces each tensor by its mean over the ranks, all-reducing in buckets of about
  // `bucket_bytes` (tensors of one dtype, flattened together).
  virtual void AllReduceMean(const std::vector<torch::Tensor>& tensors,
                             int64_t bucket_bytes = 25 << 20) = 0;
};

// Joins the process group (blocks until every rank has joined). Unavailable when the rendezvous
// fails, Unimplemented when this build lacks the backend (Gloo needs gloo's headers at build
// time; NCCL a CUDA LibTorch and nccl.h).
absl::StatusOr<std::unique_ptr<Communicator>> JoinProcessGroup(const DistributedOptions& options);

}  // namespace spheret::train
