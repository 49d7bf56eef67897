// One head of the fused causal attention (worker/nn/attention_fused.cc) in fp32 with AVX-512
// register tiles of its own, instead of the general path's BLAS calls (issue 47). At the CPU
// presets' heads (T 128, head size 32) that path made 12 sgemm_ calls a head, each a few
// microseconds of work with the call's own checks, packing and dispatch on top, over 64-row blocks
// computed whole across the diagonal. Here every product is a loop of register tiles, up to 12 rows
// by up to 4 vectors of 16 lanes, that accumulate over k with one broadcast a row and one load a
// vector; each tile stops at its last row's diagonal (rounded up to 16 keys for the logits), so
// about half of P is computed, not three quarters. The logits' tiles read k transposed into a
// scratch of the thread's (and dP's, v), gathered 16 rows at a time.
//
// The math is the BLAS path's: E = exp(scale q k^T - the row's max) on and below the diagonal,
// inv = 1 / its row sums, y = inv (E v); backward dS = scale inv E (dP - inv <E, dP>) with
// dP = dy v^T, then dq = dS k, dk = dS^T q, dv = E^T (inv dy). The softmax rows are
// attention_rows_avx512.h's. Only the summation orders of the products differ. Each head runs
// alone in a fixed order, so a run repeats bit for bit at any thread count.
//
// The heads are built with -mavx512f (attention_tiles_avx512.cc, no LibTorch header) and the rest
// for any x86-64 (attention_tiles.cc); callers ask Takes() first, which also asks the CPU.
#pragma once

#include <cstdint>

namespace spheret::nn::attention_tiles {

// Whether the tiles take heads of size hs on this CPU: AVX-512F, and hs 16, 32, 48 or 64 (one to
// four vectors a row).
bool Takes(int64_t hs);

// The fp32 scratch that ForwardHead and BackwardHead need for a head of t rows and size hs.
int64_t ForwardScratch(int64_t t, int64_t hs);
int64_t BackwardScratch(int64_t t, int64_t hs);

// One head: q, k, v rows of hs values with row stride ld (inside the packed qkv); e (t x t, row
// stride t) gets E on and below the diagonal and zeros past it as far as the backward reads; inv
// (t) the inverse row sums; y (row stride ldy) the head's output.
void ForwardHead(const float* q, const float* k, const float* v, int64_t ld, int64_t t, int64_t hs,
                 float scale, float* e, float* inv, float* y, int64_t ldy, float* scratch);

// The head's gradients from ForwardHead's e and inv and the output's gradient dy (row stride ldy):
// dq, dk, dv with row stride ld (inside the packed gradient of qkv), each value written once.
void BackwardHead(const float* q, const float* k, const float* v, int64_t ld, const float* e,
                  const float* inv, const float* dy, int64_t ldy, int64_t t, int64_t hs,
                  float scale, float* dq, float* dk, float* dv, float* scratch);

}  // namespace spheret::nn::attention_tiles
