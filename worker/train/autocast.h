// bf16 autocast of CUDA ops for a guard's lifetime, as torch.autocast("cuda", torch.bfloat16):
// the training step and zero-shot scoring use it. Include only from .cc files (LibTorch).
#pragma once

#include <ATen/autocast_mode.h>

namespace spheret::train {

class CudaAutocast {
 public:
  explicit CudaAutocast(bool enabled) : enabled_(enabled) {
    if (!enabled_) return;
    at::autocast::set_autocast_enabled(at::kCUDA, true);
    at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
    at::autocast::increment_nesting();
  }
  ~CudaAutocast() {
    if (!enabled_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_autocast_enabled(at::kCUDA, false);
  }
  CudaAutocast(const CudaAutocast&) = delete;
  CudaAutocast& operator=(const CudaAutocast&) = delete;

 private:
  bool enabled_;
};

}  // namespace spheret::train
