// The ATen side of the fused sphere update's CUDA kernels (sphere_cuda_kernels.cu): dtype dispatch,
// device guard, the current stream and the outputs' allocation. Built with SPHERET_CUDA.
#include "worker/nn/sphere_cuda.h"

#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include "worker/nn/sphere_cuda_kernels.h"

namespace spheret::nn {
namespace {

using torch::Tensor;

Tensor Forward(const Tensor& h, const Tensor& f, const Tensor& alpha, const row::Rule& rule) {
  const c10::cuda::CUDAGuard guard(h.device());
  Tensor out = torch::empty_like(h);
  const int64_t rows = h.size(0), c = h.size(1);
  if (rows == 0) return out;
  AT_DISPATCH_FLOATING_TYPES(h.scalar_type(), "sphere_forward_cuda", [&] {
    C10_CUDA_CHECK(cuda::LaunchForward<scalar_t>(
        h.data_ptr<scalar_t>(), f.data_ptr<scalar_t>(), alpha.data_ptr<scalar_t>(), rule, rows, c,
        out.data_ptr<scalar_t>(), at::cuda::getCurrentCUDAStream()));
  });
  return out;
}

std::tuple<Tensor, Tensor, Tensor> Backward(const Tensor& g, const Tensor& h, const Tensor& f,
                                            const Tensor& alpha, const row::Rule& rule) {
  const c10::cuda::CUDAGuard guard(h.device());
  Tensor dh = torch::empty_like(h), df = torch::empty_like(f);
  const int64_t rows = h.size(0), c = h.size(1);
  Tensor g_alpha = torch::zeros({rows}, h.options());
  if (rows == 0) return {dh, df, g_alpha};
  AT_DISPATCH_FLOATING_TYPES(h.scalar_type(), "sphere_backward_cuda", [&] {
    C10_CUDA_CHECK(cuda::LaunchBackward<scalar_t>(
        g.data_ptr<scalar_t>(), h.data_ptr<scalar_t>(), f.data_ptr<scalar_t>(),
        alpha.data_ptr<scalar_t>(), rule, rows, c, dh.data_ptr<scalar_t>(),
        df.data_ptr<scalar_t>(), g_alpha.data_ptr<scalar_t>(), at::cuda::getCurrentCUDAStream()));
  });
  return {dh, df, g_alpha};
}

const SphereCudaKernels kKernels{&Forward, &Backward};

}  // namespace

const SphereCudaKernels* CudaSphereKernels() { return &kKernels; }

}  // namespace spheret::nn
