// nanoGPT's learning-rate schedule: linear warmup, cosine decay to min_lr, then min_lr.
#pragma once

#include <cmath>
#include <cstdint>

namespace spheret::train {

struct ScheduleOptions {
  double learning_rate = 6e-4;
  double min_lr = 6e-5;
  int64_t warmup_iters = 2000;
  int64_t lr_decay_iters = 600000;  // > warmup_iters
  bool decay_lr = true;             // false: constant learning_rate
};

// The learning rate at iteration `it` (0-based), exactly nanoGPT's get_lr.
inline double LearningRate(int64_t it, const ScheduleOptions& s) {
  if (!s.decay_lr) return s.learning_rate;
  if (it < s.warmup_iters) {
    return s.learning_rate * static_cast<double>(it + 1) / static_cast<double>(s.warmup_iters + 1);
  }
  if (it > s.lr_decay_iters) return s.min_lr;
  const double ratio = static_cast<double>(it - s.warmup_iters) /
                       static_cast<double>(s.lr_decay_iters - s.warmup_iters);
  const double coeff = 0.5 * (1.0 + std::cos(3.14159265358979323846 * ratio));  // 1 -> 0
  return s.min_lr + coeff * (s.learning_rate - s.min_lr);
}

}  // namespace spheret::train
