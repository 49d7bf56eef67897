// The fused sphere update's CPU row kernels (sphere_fused.cc), for the loops that fuse the update
// with the next LayerNorm (norm_fused.cc). Each runs the AVX2 clone where the CPU has AVX2.
#pragma once

#include <cstdint>

#include "worker/nn/sphere_row_math.h"
#include "worker/nn/sphere_update.h"

namespace spheret::nn::row {

// The row rule of `rule`: its effective p, whether it is the exponential map, its cap.
Rule SphereRowRule(const SphereRule& rule);

// out = the sphere update of one row (h, f in R^c); *state receives what its backward needs.
void SphereForwardRow(const float* h, const float* f, float alpha, const Rule& rule, int64_t c,
                      float* out, RowState<float>* state);
void SphereForwardRow(const double* h, const double* f, double alpha, const Rule& rule, int64_t c,
                      double* out, RowState<double>* state);

// dh, df of one row from g = d loss / d out and the row's forward state; returns the row's share
// of d loss / d alpha.
float SphereBackwardRow(const float* g, const float* h, const float* f, float alpha,
                        const RowState<float>& state, int64_t c, float* dh, float* df);
double SphereBackwardRow(const double* g, const double* h, const double* f, double alpha,
                         const RowState<double>& state, int64_t c, double* dh, double* df);

}  // namespace spheret::nn::row
