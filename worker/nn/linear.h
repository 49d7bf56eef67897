// The GPT's products on the CPU through the faster of the torch wheel's two fp32 GEMMs (issue 47).
//
// The wheel carries MKL (what torch::mm calls) and oneDNN. MKL gives a CPU that is not Intel's its
// generic code path (`mkl_blas_def_sgemm_kernel_0_zen` on an AMD EPYC): there, at the xs preset's
// shapes on one thread, oneDNN's matmul ran 1.24-1.41x MKL's (docs/performance.md). So on such a
// CPU the products of the GPT's linear layers, of the MLP's fused c_fc + GELU and of the head go
// through oneDNN (at::native::mkldnn_matmul, which the wheel exports); on an Intel CPU they stay
// with MKL, bit for bit as before. SPHERET_CPU_GEMM=mkl or =onednn chooses for a process, and
// with it whether the fused attention's fp32 heads run as register tiles (attention_fused.h).
//
// The choice is made once per process from the CPU alone (never from a timing), so a run and its
// resume make the same products. oneDNN's fp32 matmul, like MKL's, repeats bit for bit at a given
// thread count.
#pragma once

#include <torch/types.h>

#include <string>

namespace spheret::nn {

enum class CpuGemm { kMkl, kOneDnn };

// This process's choice: SPHERET_CPU_GEMM (mkl, onednn) when set, else oneDNN unless the CPU is
// Intel's or LibTorch was built without oneDNN. Another value throws std::invalid_argument, which
// names it.
CpuGemm CpuGemmBackend();

// "CPU products through oneDNN (not an Intel CPU)": the choice and why, for a run's log.
std::string CpuGemmDescription();

// a (m, k) @ b (k, n), each contiguous or the transpose of a contiguous matrix (a weight's .t()):
// through oneDNN where `gemm` is oneDNN and both are CPU fp32, else torch::mm.
torch::Tensor Mm(const torch::Tensor& a, const torch::Tensor& b, CpuGemm gemm);
inline torch::Tensor Mm(const torch::Tensor& a, const torch::Tensor& b) {
  return Mm(a, b, CpuGemmBackend());
}

// torch::linear(x, w, b) (b may be undefined), with its forward and backward products made by
// oneDNN where `gemm` is oneDNN, x (..., C) and w (N, C) are CPU fp32 and contiguous and the model
// is not in composite mode (Jacobians differentiate twice); else torch::linear itself. Not
// differentiable twice.
torch::Tensor Linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                     CpuGemm gemm);
inline torch::Tensor Linear(const torch::Tensor& x, const torch::Tensor& w,
                            const torch::Tensor& b) {
  return Linear(x, w, b, CpuGemmBackend());
}

// A torch::nn::Linear's product through Linear: LinearLayer(c_fc, x).
template <typename Layer>
torch::Tensor LinearLayer(const Layer& layer, const torch::Tensor& x) {
  return Linear(x, layer->weight, layer->bias);
}

}  // namespace spheret::nn
