#include "tests/worker/nn/gradcheck.h"

#include <cmath>
#include <sstream>

namespace spheret::nn::testing {

::testing::AssertionResult GradCheck(const std::function<torch::Tensor()>& fn,
                                     const std::vector<torch::Tensor>& inputs,
                                     const GradCheckOptions& options) {
  torch::Tensor out = fn();
  const torch::Tensor weight = torch::randn_like(out);
  for (const torch::Tensor& input : inputs) {
    if (input.grad().defined()) input.mutable_grad().zero_();
  }
  (out * weight).sum().backward();
  for (size_t k = 0; k < inputs.size(); ++k) {
    const torch::Tensor analytic =
        inputs[k].grad().defined() ? inputs[k].grad().clone() : torch::zeros_like(inputs[k]);
    torch::NoGradGuard no_grad;
    torch::Tensor flat = inputs[k].detach().view({-1});
    const torch::Tensor analytic_flat = analytic.view({-1});
    for (int64_t i = 0; i < flat.numel(); ++i) {
      const double original = flat[i].item<double>();
      flat[i] = original + options.eps;
      const double plus = (fn() * weight).sum().item<double>();
      flat[i] = original - options.eps;
      const double minus = (fn() * weight).sum().item<double>();
      flat[i] = original;
      const double numeric = (plus - minus) / (2 * options.eps);
      const double got = analytic_flat[i].item<double>();
      if (!(std::abs(got - numeric) <= options.atol + options.rtol * std::abs(numeric))) {
        return ::testing::AssertionFailure() << "input " << k << " element " << i << ": autograd "
                                             << got << " vs finite differences " << numeric;
      }
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace spheret::nn::testing
