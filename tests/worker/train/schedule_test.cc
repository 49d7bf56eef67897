#include "worker/train/schedule.h"

#include <gtest/gtest.h>

#include <cmath>

namespace spheret::train {
namespace {

// nanoGPT's get_lr, transcribed here independently.
double NanoGptLr(int64_t it, double lr, double min_lr, int64_t warmup, int64_t decay_iters) {
  if (it < warmup) return lr * (it + 1) / (warmup + 1);
  if (it > decay_iters) return min_lr;
  const double decay_ratio = double(it - warmup) / double(decay_iters - warmup);
  const double coeff = 0.5 * (1.0 + std::cos(M_PI * decay_ratio));
  return min_lr + coeff * (lr - min_lr);
}

TEST(ScheduleTest, MatchesNanoGptAtWarmupMidAndEnd) {
  const ScheduleOptions s{6e-4, 6e-5, 2000, 600000, true};
  for (int64_t it : {0L, 1L, 999L, 1999L, 2000L, 301000L, 599999L, 600000L, 600001L, 900000L}) {
    EXPECT_DOUBLE_EQ(LearningRate(it, s), NanoGptLr(it, 6e-4, 6e-5, 2000, 600000)) << it;
  }
  EXPECT_DOUBLE_EQ(LearningRate(0, s), 6e-4 / 2001);
  EXPECT_DOUBLE_EQ(LearningRate(2000, s), 6e-4);                   // peak
  EXPECT_NEAR(LearningRate(301000, s), (6e-4 + 6e-5) / 2, 1e-15);  // half way
  EXPECT_DOUBLE_EQ(LearningRate(600000, s), 6e-5);                 // end
}

TEST(ScheduleTest, ConstantWhenDecayIsOff) {
  EXPECT_DOUBLE_EQ(LearningRate(5, ScheduleOptions{1e-3, 1e-4, 100, 300, false}), 1e-3);
}

}  // namespace
}  // namespace spheret::train
