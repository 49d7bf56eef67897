// The Communicator over c10d's Gloo process group. Built when gloo's headers are present (Debian's
// libgloo-dev; LibTorch carries gloo itself but not its headers); else communicator_absent.cc.
#include <torch/torch.h>

#include <chrono>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "worker/train/communicator.h"

namespace spheret::train {
namespace {

class GlooCommunicator : public Communicator {
 public:
  GlooCommunicator(c10::intrusive_ptr<c10d::ProcessGroupGloo> group, int rank, int world_size)
      : group_(std::move(group)), rank_(rank), world_size_(world_size) {}

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }

  void Broadcast(const std::vector<torch::Tensor>& tensors) override {
    for (const torch::Tensor& tensor : tensors) {
      std::vector<torch::Tensor> one = {tensor};
      group_->broadcast(one)->wait();
    }
  }

  void AllReduceMean(const std::vector<torch::Tensor>& tensors, int64_t bucket_bytes) override {
    std::vector<torch::Tensor> bucket;
    int64_t bytes = 0;
    auto flush = [&] {
      if (bucket.empty()) return;
      std::vector<torch::Tensor> flat = {torch::cat(Flatten(bucket))};
      group_->allreduce(flat)->wait();
      flat[0].div_(world_size_);
      int64_t offset = 0;
      for (torch::Tensor& tensor : bucket) {
        tensor.copy_(flat[0].narrow(0, offset, tensor.numel()).view_as(tensor));
        offset += tensor.numel();
      }
      bucket.clear();
      bytes = 0;
    };
    for (const torch::Tensor& tensor : tensors) {
      if (!bucket.empty() && bucket.front().scalar_type() != tensor.scalar_type()) flush();
      bucket.push_back(tensor);
      bytes += tensor.numel() * tensor.element_size();
      if (bytes >= bucket_bytes) flush();
    }
    flush();
  }

 private:
  static std::vector<torch::Tensor> Flatten(const std::vector<torch::Tensor>& tensors) {
    std::vector<torch::Tensor> flat;
    for (const torch::Tensor& tensor : tensors) flat.push_back(tensor.reshape({-1}));
    return flat;
  }

  c10::intrusive_ptr<c10d::ProcessGroupGloo> group_;
  int rank_, world_size_;
};

std::shared_ptr<::gloo::transport::Device> GlooDevice(const DistributedOptions& options) {
  if (!options.network_interface.empty()) {
    return c10d::ProcessGroupGloo::createDeviceForInterface(options.network_interface);
  }
  if (options.master_addr == "127.0.0.1" || options.master_addr == "localhost") {
    return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  }
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

}  // namespace

std::unique_ptr<Communicator> JoinProcessGroup(const DistributedOptions& options,
                                               std::string* error) {
  try {
    c10d::TCPStoreOptions store_options;
    store_options.port = static_cast<uint16_t>(options.master_port);
    store_options.isServer = options.rank == 0;
    store_options.numWorkers = options.world_size;
    store_options.waitWorkers = true;
    store_options.timeout = std::chrono::seconds(options.timeout_seconds);
    auto store = c10::make_intrusive<c10d::TCPStore>(options.master_addr, store_options);
    auto gloo_options = c10d::ProcessGroupGloo::Options::create();
    gloo_options->timeout = std::chrono::seconds(options.timeout_seconds);
    gloo_options->devices.push_back(GlooDevice(options));
    auto group = c10::make_intrusive<c10d::ProcessGroupGloo>(store, options.rank,
                                                             options.world_size, gloo_options);
    return std::make_unique<GlooCommunicator>(std::move(group), options.rank, options.world_size);
  } catch (const std::exception& e) {
    std::string what = e.what();
    *error = "cannot join the process group at " + options.master_addr + ":" +
             std::to_string(options.master_port) + " as rank " + std::to_string(options.rank) +
             " of " + std::to_string(options.world_size) + ": " + what.substr(0, what.find('\n'));
    return nullptr;
  }
}

}  // namespace spheret::train
