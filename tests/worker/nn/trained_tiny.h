// Tiny GPTs trained for a few steps, shared by the tests of nn_test that read them: the
// Proposition 6 bounds on trained weights (stability_trained_test.cc) and the Jacobian
// measurements against dense ones (jacobian_test.cc) read the same models.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "config/connection_options.h"
#include "worker/nn/gpt.h"

namespace spheret::nn::testing {

// The steps of the fast tests' models: Adam at lr 3e-2 moves each weight by up to 3e-2 a step
// (about that while its gradient keeps its sign), so after 10 steps the weights stand up to 0.3
// from an init of std 0.02: trained weights, not init ones (the step parameters a moved too),
// which is all the trained tests ask for; their exhaustive twins train 15 and 30 steps.
inline constexpr int kBriefSteps = 10;

struct TrainedTiny {
  Gpt model{nullptr};         // fp64, eval mode; shared, so the tests leave it as it is
  torch::Tensor idx;          // (1, 4) the first training sequence
  torch::Tensor block_input;  // (1, 4, 6) the first block's input on idx
};

// A GPT of two blocks of width 6 (2 heads, vocab 13, 4 positions, biases unless nGPT) whose
// connection is `connection` (method, p, angle_max, decay, inner norm; widths and depth come
// from the GPT), in fp64, after `steps` Adam steps (lr 3e-2; nGPT's weights renormalized after
// each) on 4 random sequences of 4 tokens drawn after torch::manual_seed(seed). Trained at the
// first call with these arguments and kept for the process, so the tests of one process that
// ask for the same model share one training (under ctest each test is its own process and
// trains only the models it reads). Not thread-safe.
const TrainedTiny& BrieflyTrained(const ConnectionOptions& connection, int64_t seed, int steps);

}  // namespace spheret::nn::testing
