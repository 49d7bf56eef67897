// c10d's Gloo backend. Built when gloo's headers are present (Debian's libgloo-dev; LibTorch has
// gloo inside but does not ship its headers); else communicator_gloo_absent.cc.
#include <chrono>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include "worker/train/communicator_backends.h"

namespace spheret::train {
namespace {

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

absl::StatusOr<c10::intrusive_ptr<c10d::Backend>> MakeGlooBackend(
    const c10::intrusive_ptr<c10d::Store>& store, const DistributedOptions& options) {
  auto gloo_options = c10d::ProcessGroupGloo::Options::create();
  gloo_options->timeout = std::chrono::seconds(options.timeout_seconds);
  gloo_options->devices.push_back(GlooDevice(options));
  return c10::intrusive_ptr<c10d::Backend>(c10::make_intrusive<c10d::ProcessGroupGloo>(
      store, options.rank, options.world_size, gloo_options));
}

}  // namespace spheret::train
