#include "worker/train/communicator.h"

#include <torch/torch.h>

#include <chrono>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "worker/train/communicator_backends.h"

namespace spheret::train {
namespace {

// Collectives over any c10d backend (Gloo, NCCL).
class BackendCommunicator : public Communicator {
 public:
  BackendCommunicator(c10::intrusive_ptr<c10d::Backend> backend, int rank, int world_size)
      : backend_(std::move(backend)), rank_(rank), world_size_(world_size) {}

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }

  void Broadcast(const std::vector<torch::Tensor>& tensors) override {
    for (const torch::Tensor& tensor : tensors) {
      std::vector<torch::Tensor> one = {tensor};
      backend_->broadcast(one)->wait();
    }
  }

  void AllReduceMean(const std::vector<torch::Tensor>& tensors, int64_t bucket_bytes) override {
    std::vector<torch::Tensor> bucket;
    int64_t bytes = 0;
    for (const torch::Tensor& tensor : tensors) {
      const bool same_kind =
          bucket.empty() || (bucket.front().scalar_type() == tensor.scalar_type() &&
                             bucket.front().device() == tensor.device());
      if (!same_kind) Flush(&bucket, &bytes);
      bucket.push_back(tensor);
      bytes += tensor.numel() * tensor.element_size();
      if (bytes >= bucket_bytes) Flush(&bucket, &bytes);
    }
    Flush(&bucket, &bytes);
  }

 private:
  // All-reduces the bucket as one flat tensor and writes the means back.
  void Flush(std::vector<torch::Tensor>* bucket, int64_t* bytes) {
    if (bucket->empty()) return;
    std::vector<torch::Tensor> flat_parts;
    for (const torch::Tensor& tensor : *bucket) flat_parts.push_back(tensor.reshape({-1}));
    std::vector<torch::Tensor> flat = {torch::cat(flat_parts)};
    backend_->allreduce(flat)->wait();
    flat[0].div_(world_size_);
    int64_t offset = 0;
    for (torch::Tensor& tensor : *bucket) {
      tensor.copy_(flat[0].narrow(0, offset, tensor.numel()).view_as(tensor));
      offset += tensor.numel();
    }
    bucket->clear();
    *bytes = 0;
  }

  c10::intrusive_ptr<c10d::Backend> backend_;
  int rank_, world_size_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> JoinProcessGroup(const DistributedOptions& options) {
  const std::string where = options.master_addr + ":" + std::to_string(options.master_port) +
                            " as rank " + std::to_string(options.rank) + " of " +
                            std::to_string(options.world_size);
  absl::StatusOr<c10::intrusive_ptr<c10d::Backend>> backend;
  try {
    c10d::TCPStoreOptions store_options;
    store_options.port = static_cast<uint16_t>(options.master_port);
    store_options.isServer = options.rank == 0;
    store_options.numWorkers = options.world_size;
    store_options.waitWorkers = true;
    store_options.timeout = std::chrono::seconds(options.timeout_seconds);
    c10::intrusive_ptr<c10d::Store> store =
        c10::make_intrusive<c10d::TCPStore>(options.master_addr, store_options);
    backend = options.backend == CollectiveBackend::kNccl ? MakeNcclBackend(store, options)
                                                          : MakeGlooBackend(store, options);
  } catch (const std::exception& e) {
    const std::string what = e.what();
    backend = absl::UnavailableError(what.substr(0, what.find('\n')));
  }
  if (!backend.ok()) {
    return absl::Status(backend.status().code(), "cannot join the process group at " + where +
                                                     ": " +
                                                     std::string(backend.status().message()));
  }
  return std::unique_ptr<Communicator>(
      std::make_unique<BackendCommunicator>(std::move(*backend), options.rank, options.world_size));
}

}  // namespace spheret::train
