// The heap on transparent huge pages, once a training run has allocated its working set.
//
// A process training preset xs has a heap of ~200 MB (activations, gradients, packed matmul
// operands, LibTorch's own; spheret-lm keeps freed buffers there: worker/lm_main.cc), about
// 50,000 pages of 4 KB. A run's buffers mostly reuse heap space freed before the run began, so
// the whole heap is advised, not only what the run added. glibc's other arenas, which threads may
// allocate from, are left as they are (at xs on two threads the process held 141 MB of huge
// pages). On the 2-core machine of docs/performance.md, at xs on one thread, five alternating
// pairs of bench steps were 1.2-4.5 ms (of ~80) faster with it.
#pragma once

#include <cstdint>

namespace spheret::train {

// Advises the kernel to back the process's heap (the [heap] lines of /proc/self/maps, their 2
// MB-aligned part) with transparent huge pages (MADV_HUGEPAGE), and collapses the pages already
// there into huge pages now (MADV_COLLAPSE, Linux 6.1 on; before it khugepaged does so in its own
// time). The collapse copies the pages: ~0.6 s for a 200 MB heap here. Best effort: where the
// kernel refuses, nothing changes. Returns the bytes advised (0: none).
long BackHeapWithHugePages();

// Whether a training run of `steps` more steps pays for the collapse: at xs it takes ~200 steps
// to win back 0.6 s.
inline bool WorthHugePages(int64_t steps) { return steps >= 250; }

}  // namespace spheret::train
