// Rotary position embedding (Su et al., "RoFormer", 2021) for the queries and keys of one
// attention, `pos_encoding: rope` (docs/methods.md §0 and §3).
//
// The half-split form (GPT-NeoX, and LLaMA as ported to Hugging Face): in a head of width hs,
// dimension i < hs/2 is paired with i + hs/2, and at position m the pair is rotated by the angle
// m * theta_i, theta_i = base^(-2i/hs):
//   y_i        = x_i cos(m theta_i) - x_{i+hs/2} sin(m theta_i)
//   y_{i+hs/2} = x_i sin(m theta_i) + x_{i+hs/2} cos(m theta_i)
// Each pair turns by a rotation, so ||y|| = ||x|| and <R_m q, R_n k> depends on m - n only.
// (The interleaved form pairs 2i with 2i+1; it is the same map up to a fixed permutation of the
// head's dimensions, which W_q and W_k absorb.)
#pragma once

#include <torch/types.h>

namespace spheret::nn {

struct RopeOptions {
  double base = 10000.0;  // theta_i = base^(-2i/hs)
};

// The angles m * theta_i for positions m = 0..t-1: (T, hs/2), in `dtype` (computed in fp64).
torch::Tensor RopeAngles(int64_t t, int64_t head_size, const RopeOptions& options,
                         const torch::TensorOptions& tensor_options);

// x: (B, nh, T, hs) with hs even; row t of the sequence sits at position t. Returns R_t x, same
// shape and dtype (the rotation runs in at least fp32). Differentiable (twice).
torch::Tensor ApplyRope(const torch::Tensor& x, const RopeOptions& options = {});

}  // namespace spheret::nn
