// Central-difference gradient check, as torch.autograd.gradcheck (which LibTorch's C++ API lacks).
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <vector>

namespace spheret::nn::testing {

struct GradCheckOptions {
  double eps = 1e-6;   // Finite-difference step.
  double atol = 1e-5;  // Pass when |analytic - numeric| <= atol + rtol |numeric|.
  double rtol = 1e-3;
};

// `inputs` are fp64 leaves with requires_grad; `fn` computes the output from them (it may read
// them through modules that share their storage). Compares d sum(fn() * w) / d input, for a fixed
// random w, from autograd against central differences, element by element.
::testing::AssertionResult GradCheck(const std::function<torch::Tensor()>& fn,
                                     const std::vector<torch::Tensor>& inputs,
                                     const GradCheckOptions& options = {});

}  // namespace spheret::nn::testing
