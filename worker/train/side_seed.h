// The seeds of a run's side streams (evaluation, diagnostics, gates, Jacobians): each draws from a
// generator of its own, seeded by (seed, stream, step), so when and how often a run evaluates or
// measures never moves the training generator, and a resumed run draws what a straight one does.
#pragma once

#include <cstdint>

namespace spheret::train {

enum class SideStream : uint64_t { kEval = 1, kDiag = 2, kGate = 3, kJacobian = 4, kGateFixed = 5 };

// SplitMix64 over (seed, stream, step).
inline uint64_t SideSeed(int64_t seed, SideStream stream, int64_t step) {
  uint64_t x = static_cast<uint64_t>(seed);
  for (uint64_t word : {static_cast<uint64_t>(stream), static_cast<uint64_t>(step)}) {
    x += 0x9E3779B97F4A7C15ull ^ word;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    x ^= x >> 31;
  }
  return x;
}

}  // namespace spheret::train
