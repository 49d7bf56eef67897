#include "worker/nn/rope.h"

#include <torch/torch.h>

namespace spheret::nn {

torch::Tensor RopeAngles(int64_t t, int64_t head_size, const RopeOptions& options,
                         const torch::TensorOptions& tensor_options) {
  const torch::TensorOptions wide = torch::TensorOptions().dtype(torch::kDouble);
  const torch::Tensor i = torch::arange(head_size / 2, wide);                          // (hs/2)
  const torch::Tensor theta = torch::pow(options.base, -2.0 * i / double(head_size));  // (hs/2)
  const torch::Tensor m = torch::arange(t, wide);                                      // (T)
  return torch::outer(m, theta).to(tensor_options);                                    // (T, hs/2)
}

torch::Tensor ApplyRope(const torch::Tensor& x, const RopeOptions& options) {
  const int64_t t = x.size(-2), hs = x.size(-1);
  TORCH_CHECK(hs % 2 == 0, "rotary position embedding needs an even head size, got ", hs);
  const torch::Tensor x32 = x.element_size() < 4 ? x.to(torch::kFloat) : x;
  const torch::Tensor angles = RopeAngles(t, hs, options, x32.options());  // (T, hs/2)
  const torch::Tensor cos = angles.cos(), sin = angles.sin();              // broadcast over B, nh
  const torch::Tensor x1 = x32.narrow(-1, 0, hs / 2), x2 = x32.narrow(-1, hs / 2, hs / 2);
  const torch::Tensor y =
      torch::cat({x1 * cos - x2 * sin, x1 * sin + x2 * cos}, -1);  // (B,nh,T,hs)
  return y.to(x.scalar_type());
}

}  // namespace spheret::nn
