#include "worker/nn/linear.h"

#include <cpuid.h>
#include <torch/torch.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "worker/nn/connection.h"

// oneDNN's matmul as ATen's addmm uses it for bf16: result = alpha mat1 mat2 + beta result, mat1
// and mat2 contiguous or transposed. Exported by libtorch_cpu; its header is not in the wheel.
namespace at::native {
void mkldnn_matmul(const at::Tensor& mat1, const at::Tensor& mat2, const at::Tensor& result,
                   float beta, float alpha);
}  // namespace at::native

namespace spheret::nn {
namespace {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

bool IntelCpu() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0) return false;
  char vendor[13] = {};
  std::memcpy(vendor, &ebx, 4);
  std::memcpy(vendor + 4, &edx, 4);
  std::memcpy(vendor + 8, &ecx, 4);
  return std::strcmp(vendor, "GenuineIntel") == 0;
}

CpuGemm ResolveCpuGemm() {
  const char* set = std::getenv("SPHERET_CPU_GEMM");
  // A LibTorch built without oneDNN (MKLDNN) has the function but not the matmul behind it.
  if (set == nullptr || *set == '\0') {
    return IntelCpu() || !at::hasMKLDNN() ? CpuGemm::kMkl : CpuGemm::kOneDnn;
  }
  if (std::strcmp(set, "mkl") == 0) return CpuGemm::kMkl;
  if (std::strcmp(set, "onednn") == 0) {
    if (!at::hasMKLDNN()) {
      throw std::invalid_argument(
          "SPHERET_CPU_GEMM is 'onednn', but this LibTorch was built "
          "without oneDNN (MKLDNN): unset it or set mkl");
    }
    return CpuGemm::kOneDnn;
  }
  throw std::invalid_argument(
      std::string("SPHERET_CPU_GEMM is '") + set +
      "': it takes mkl or onednn (or unset: oneDNN unless the CPU is Intel's)");
}

bool OneDnnTakes(const Tensor& t) {
  return t.device().is_cpu() && t.scalar_type() == torch::kFloat && t.dim() == 2 &&
         !t.is_mkldnn() && t.layout() == torch::kStrided && at::hasMKLDNN();
}

// a @ b into a new (m, n) tensor that first holds `fill` (broadcast) and then fill + a b.
Tensor OneDnnMm(const Tensor& a, const Tensor& b, const Tensor& fill) {
  Tensor out = torch::empty({a.size(0), b.size(1)}, a.options());
  if (fill.defined()) out.copy_(fill.expand_as(out));
  // A view that is neither contiguous nor a transposed contiguous matrix is copied by the callee.
  at::native::mkldnn_matmul(a, b, out, fill.defined() ? 1.0f : 0.0f, 1.0f);
  return out;
}

// The products of x w^T + b and of its gradients; b is an input of its own where the layer has one
// (an undefined tensor cannot be an autograd input).
Tensor LinearForward(AutogradContext* ctx, const Tensor& x, const Tensor& w, const Tensor& b) {
  ctx->save_for_backward({x, w});
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = w.size(0);
  return OneDnnMm(x.reshape({-1, x.size(-1)}), w.t(), b).view(shape);
}

variable_list LinearBackward(AutogradContext* ctx, const Tensor& grad, bool bias) {
  const variable_list saved = ctx->get_saved_variables();
  const Tensor &x = saved[0], &w = saved[1];
  const Tensor dy = grad.contiguous().view({-1, w.size(0)});
  Tensor dx = ctx->needs_input_grad(0) ? OneDnnMm(dy, w, {}).view(x.sizes()) : Tensor();
  Tensor dw =
      ctx->needs_input_grad(1) ? OneDnnMm(dy.t(), x.reshape({-1, x.size(-1)}), {}) : Tensor();
  if (!bias) return {dx, dw};
  return {dx, dw, ctx->needs_input_grad(2) ? dy.sum(0) : Tensor()};
}

class LinearFunction : public torch::autograd::Function<LinearFunction> {
 public:
  static Tensor forward(AutogradContext* ctx, const Tensor& x, const Tensor& w, const Tensor& b) {
    return LinearForward(ctx, x, w, b);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (!grads[0].defined()) return {Tensor(), Tensor(), Tensor()};
    return LinearBackward(ctx, grads[0], true);
  }
};

class LinearNoBiasFunction : public torch::autograd::Function<LinearNoBiasFunction> {
 public:
  static Tensor forward(AutogradContext* ctx, const Tensor& x, const Tensor& w) {
    return LinearForward(ctx, x, w, {});
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (!grads[0].defined()) return {Tensor(), Tensor()};
    return LinearBackward(ctx, grads[0], false);
  }
};

}  // namespace

CpuGemm CpuGemmBackend() {
  static const CpuGemm chosen = ResolveCpuGemm();  // a throw leaves it unset: the next call throws
  return chosen;
}

std::string CpuGemmDescription() {
  const char* set = std::getenv("SPHERET_CPU_GEMM");
  std::string why = "not an Intel CPU";
  if (set != nullptr && *set != '\0') {
    why = "SPHERET_CPU_GEMM";
  } else if (IntelCpu()) {
    why = "an Intel CPU";
  } else if (!at::hasMKLDNN()) {
    why = "this LibTorch has no oneDNN";
  }
  return std::string("CPU products through ") +
         (CpuGemmBackend() == CpuGemm::kOneDnn ? "oneDNN" : "MKL") + " (" + why + ")";
}

Tensor Mm(const Tensor& a, const Tensor& b, CpuGemm gemm) {
  if (gemm != CpuGemm::kOneDnn || !OneDnnTakes(a) || !OneDnnTakes(b) || a.size(1) != b.size(0)) {
    return torch::mm(a, b);
  }
  return OneDnnMm(a, b, {});
}

Tensor Linear(const Tensor& x, const Tensor& w, const Tensor& b, CpuGemm gemm) {
  const bool ours = gemm == CpuGemm::kOneDnn && x.device().is_cpu() &&
                    x.scalar_type() == torch::kFloat && x.dim() >= 2 && x.numel() > 0 &&
                    x.is_contiguous() && x.size(-1) == w.size(1) && OneDnnTakes(w) &&
                    w.is_contiguous() &&
                    (!b.defined() || (b.dim() == 1 && b.size(0) == w.size(0) &&
                                      b.scalar_type() == torch::kFloat && b.device().is_cpu())) &&
                    !CompositeMode();
  if (!ours) return torch::linear(x, w, b);
  return b.defined() ? LinearFunction::apply(x, w, b) : LinearNoBiasFunction::apply(x, w);
}

}  // namespace spheret::nn
