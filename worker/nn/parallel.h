// ParallelFor: the project's own CPU kernels on LibTorch's intra-op threads.
//
// at::parallel_for is a header template: its parallel branch (ATen/ParallelOpenMP.h) is compiled
// only where _OPENMP is defined. LibTorch's wheel runs its intra-op work on OpenMP, so in a file
// built without -fopenmp at::parallel_for runs its whole range on the calling thread, whatever
// torch::set_num_threads says. ParallelFor is at::parallel_for instantiated once, in parallel.cc,
// which is built with OpenMP against LibTorch's own OpenMP runtime: the same threads and thread
// count as LibTorch's kernels. Kernels call it instead of at::parallel_for.
#pragma once

#include <c10/util/FunctionRef.h>

#include <cstdint>

namespace spheret::nn {

// Calls f(chunk_begin, chunk_end) over [begin, end) split into at most one chunk per intra-op
// thread, each of at least `grain` items (one chunk, on this thread, when the range is no larger
// than `grain`, the process has one thread, or this runs inside another parallel region), as
// at::parallel_for. An exception thrown in a chunk is rethrown here, after every chunk ended.
void ParallelFor(int64_t begin, int64_t end, int64_t grain,
                 c10::function_ref<void(int64_t, int64_t)> f);

}  // namespace spheret::nn
