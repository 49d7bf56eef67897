// The c10d backends behind JoinProcessGroup, each in a file built only when its headers exist
// (communicator_gloo.cc / communicator_nccl.cc, else the *_absent.cc twins).
#pragma once

#include <string>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "absl/status/statusor.h"
#include "worker/train/communicator.h"

namespace spheret::train {

// Each returns the backend; Unimplemented when this build lacks it. May throw c10::Error (the
// caller catches it).
absl::StatusOr<c10::intrusive_ptr<c10d::Backend>> MakeGlooBackend(
    const c10::intrusive_ptr<c10d::Store>& store, const DistributedOptions& options);
absl::StatusOr<c10::intrusive_ptr<c10d::Backend>> MakeNcclBackend(
    const c10::intrusive_ptr<c10d::Store>& store, const DistributedOptions& options);

}  // namespace spheret::train
