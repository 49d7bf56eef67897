#include "worker/nn/parallel.h"

#include <ATen/Parallel.h>

// This file is the reason ParallelFor exists: it must see at::parallel_for's OpenMP branch.
#if AT_PARALLEL_OPENMP && !defined(_OPENMP)
#error "worker/nn/parallel.cc must be compiled with -fopenmp (worker/nn/CMakeLists.txt)"
#endif

namespace spheret::nn {

void ParallelFor(int64_t begin, int64_t end, int64_t grain,
                 c10::function_ref<void(int64_t, int64_t)> f) {
  at::parallel_for(begin, end, grain, [&](int64_t first, int64_t last) { f(first, last); });
}

}  // namespace spheret::nn
