// attention_tiles.h's questions, compiled for any x86-64 (the heads are in
// attention_tiles_avx512.cc, which only a CPU with AVX-512 runs).
#include "worker/nn/attention_tiles.h"

namespace spheret::nn::attention_tiles {

bool Takes(int64_t hs) {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  return avx512 && (hs == 16 || hs == 32 || hs == 48 || hs == 64);
}

int64_t ForwardScratch(int64_t t, int64_t hs) { return hs * ((t + 15) / 16 * 16); }

int64_t BackwardScratch(int64_t t, int64_t hs) { return ForwardScratch(t, hs) + t * t + t * hs; }

}  // namespace spheret::nn::attention_tiles
