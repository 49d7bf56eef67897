// The CUDA kernel against the CPU fused update. Runs wherever a GPU is present; skipped elsewhere.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "worker/nn/sphere_fused.h"

namespace spheret::nn {
namespace {

TEST(SphereCudaTest, KernelMatchesCpuInForwardAndGradients) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  ASSERT_TRUE(SphereCudaKernelBuilt()) << "a GPU is present but the CUDA kernel was not built";
  torch::manual_seed(5);
  for (Method method :
       {Method::kGeoNorm, Method::kProjSpheret, Method::kCaySpheret, Method::kPSpheret}) {
    const SphereRule rule{method, 0.5, 0.7853981633974483};
    for (torch::ScalarType type : {torch::kFloat, torch::kDouble}) {
      for (int64_t c : {7, 128, 768, 1280}) {  // Below one warp, and wider than a block.
        const auto options = torch::TensorOptions().dtype(type);
        const torch::Tensor h0 = torch::randn({4, 33, c}, options) * 3;
        const torch::Tensor f0 = torch::randn({4, 33, c}, options);
        const torch::Tensor w = torch::randn({4, 33, c}, options);
        torch::Tensor outs[2], grads[2][3];
        for (int k = 0; k < 2; ++k) {
          const torch::Device device = k == 0 ? torch::kCPU : torch::kCUDA;
          const torch::Tensor h = h0.to(device).requires_grad_();
          const torch::Tensor f = f0.to(device).requires_grad_();
          const torch::Tensor alpha = torch::full({}, 0.6, options.device(device)).requires_grad_();
          outs[k] = SphereUpdateFused(h, f, alpha, rule).cpu();
          (SphereUpdateFused(h, f, alpha, rule) * w.to(device)).sum().backward();
          grads[k][0] = h.grad().cpu(), grads[k][1] = f.grad().cpu(),
          grads[k][2] = alpha.grad().cpu();
        }
        const double tol = type == torch::kDouble ? 1e-10 : 1e-4;
        EXPECT_TRUE(torch::allclose(outs[1], outs[0], tol, tol)) << MethodId(method) << " C " << c;
        for (int i = 0; i < 3; ++i) {
          EXPECT_TRUE(torch::allclose(grads[1][i], grads[0][i], tol, tol))
              << MethodId(method) << " C " << c << " gradient " << i;
        }
      }
    }
  }
}

TEST(SphereCudaTest, Bf16InputsUseFp32Math) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const torch::Tensor h = torch::randn({64, 256}, torch::kCUDA).to(torch::kBFloat16);
  const torch::Tensor f = torch::randn({64, 256}, torch::kCUDA).to(torch::kBFloat16);
  const SphereRule rule{Method::kGeoNorm, 1.0, 0.7853981633974483};
  const torch::Tensor alpha = torch::full({}, 0.5, torch::kCUDA);
  const torch::Tensor gpu = SphereUpdateFused(h, f, alpha, rule).cpu();
  const torch::Tensor cpu = SphereUpdateFused(h.cpu(), f.cpu(), alpha.cpu(), rule);
  EXPECT_EQ(gpu.scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(torch::allclose(gpu.to(torch::kFloat), cpu.to(torch::kFloat), 1e-2, 1e-2));
}

}  // namespace
}  // namespace spheret::nn
