// The c10d backends behind JoinProcessGroup, each in a file built only when its headers exist
// (communicator_gloo.cc / communicator_nccl.cc, else the *_absent.cc twins).
#pragma once

#include <string>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "worker/train/communicator.h"

namespace spheret::train {

// Each returns the backend, or a null pointer with *error set.
c10::intrusive_ptr<c10d::Backend> MakeGlooBackend(const c10::intrusive_ptr<c10d::Store>& store,
                                                  const DistributedOptions& options,
                                                  std::string* error);
c10::intrusive_ptr<c10d::Backend> MakeNcclBackend(const c10::intrusive_ptr<c10d::Store>& store,
                                                  const DistributedOptions& options,
                                                  std::string* error);

}  // namespace spheret::train
