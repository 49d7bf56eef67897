// Linked instead of sphere_cuda.cc and sphere_cuda_kernels.cu when SPHERET_CUDA is off: no CUDA
// kernel in this build.
#include "worker/nn/sphere_cuda.h"

namespace spheret::nn {

const SphereCudaKernels* CudaSphereKernels() { return nullptr; }

}  // namespace spheret::nn
