// Plain-loop reference computations for the attention, MLP, rotary embedding and related-methods
// tests of worker/nn (double precision, no torch math): independent of the code they check.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace spheret::nn::reference {

using Vec = std::vector<double>;
using Mat = std::vector<Vec>;  // rows

inline Vec Values(const torch::Tensor& t) {
  const torch::Tensor c = t.detach().contiguous().to(torch::kDouble);
  return Vec(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

inline Mat Rows(const torch::Tensor& m) {
  Mat rows;
  for (int64_t r = 0; r < m.size(0); ++r) rows.push_back(Values(m[r]));
  return rows;
}

inline double Dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

inline Vec Normalized(const Vec& x) {
  const double norm = std::sqrt(Dot(x, x));
  Vec y(x);
  for (double& v : y) v /= norm;
  return y;
}

inline Vec MatVec(const Mat& w, const Vec& x) {
  Vec y;
  for (const Vec& row : w) y.push_back(Dot(row, x));
  return y;
}

inline Vec Slice(const Vec& x, size_t begin, size_t size) {
  return Vec(x.begin() + begin, x.begin() + begin + size);
}

inline void ExpectNear(const Vec& got, const Vec& want, double tolerance, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tolerance) << what << " " << i;
}

// One head's vector at position m, each pair (i, i + hs/2) turned by m * 10000^(-2i/hs).
inline Vec RopeLoop(const Vec& x, int64_t m) {
  const size_t half = x.size() / 2;
  Vec y(x.size());
  for (size_t i = 0; i < half; ++i) {
    const double angle = m * std::pow(10000.0, -2.0 * i / static_cast<double>(x.size()));
    y[i] = x[i] * std::cos(angle) - x[i + half] * std::sin(angle);
    y[i + half] = x[i] * std::sin(angle) + x[i + half] * std::cos(angle);
  }
  return y;
}

// Causal self-attention of x (T rows of C) with c_attn rows w_attn (3C x C) and c_proj w_proj
// (C x C), no biases. With s_qk (C, effective): q, k <- s_qk * n(q), s_qk * n(k) per head and
// softmax scale sqrt(hs); else 1/sqrt(hs).
inline Mat AttentionLoop(const Mat& x, const Mat& w_attn, const Mat& w_proj, size_t n_head,
                         bool rope, const Vec* s_qk) {
  const size_t t_len = x.size(), c = x[0].size(), hs = c / n_head;
  Mat qkv;
  for (const Vec& row : x) qkv.push_back(MatVec(w_attn, row));
  Mat y(t_len, Vec(c, 0.0));
  for (size_t h = 0; h < n_head; ++h) {
    Mat q, k, v;
    for (size_t t = 0; t < t_len; ++t) {
      q.push_back(Slice(qkv[t], h * hs, hs));
      k.push_back(Slice(qkv[t], c + h * hs, hs));
      v.push_back(Slice(qkv[t], 2 * c + h * hs, hs));
      if (rope) {
        q[t] = RopeLoop(q[t], static_cast<int64_t>(t));
        k[t] = RopeLoop(k[t], static_cast<int64_t>(t));
      }
      if (s_qk != nullptr) {
        q[t] = Normalized(q[t]);
        k[t] = Normalized(k[t]);
        for (size_t i = 0; i < hs; ++i) {
          q[t][i] *= (*s_qk)[h * hs + i];
          k[t][i] *= (*s_qk)[h * hs + i];
        }
      }
    }
    const double scale = s_qk != nullptr ? std::sqrt(double(hs)) : 1.0 / std::sqrt(double(hs));
    for (size_t t = 0; t < t_len; ++t) {
      Vec weight(t + 1);
      double top = -1e300, sum = 0;
      for (size_t u = 0; u <= t; ++u) top = std::max(top, weight[u] = scale * Dot(q[t], k[u]));
      for (size_t u = 0; u <= t; ++u) sum += weight[u] = std::exp(weight[u] - top);
      for (size_t u = 0; u <= t; ++u) {
        for (size_t i = 0; i < hs; ++i) y[t][h * hs + i] += weight[u] / sum * v[u][i];
      }
    }
  }
  Mat out;
  for (const Vec& row : y) out.push_back(MatVec(w_proj, row));
  return out;
}

// nGPT's MLP of x (T rows of C): c_fc rows w_fc (8C x C) give u (first 4C) and nu (last 4C);
// u <- s_u u, nu <- s_nu sqrt(C) nu; out = w_proj (C x 4C) (u * nu * sigmoid(nu)).
inline Mat SwiGluLoop(const Mat& x, const Mat& w_fc, const Mat& w_proj, const Vec& s_u,
                      const Vec& s_nu) {
  const size_t c = x[0].size(), hidden = 4 * c;
  Mat out;
  for (const Vec& row : x) {
    const Vec a = MatVec(w_fc, row);
    Vec g(hidden);
    for (size_t i = 0; i < hidden; ++i) {
      const double u = a[i] * s_u[i], nu = a[hidden + i] * s_nu[i] * std::sqrt(double(c));
      g[i] = u * nu / (1.0 + std::exp(-nu));
    }
    out.push_back(MatVec(w_proj, g));
  }
  return out;
}

// F(x)_j = tanh(sum_k W_jk x_k) for one token x of width C, W (C x C) row-major.
inline Vec SublayerLoop(const Vec& x, const Vec& w) {
  const size_t c = x.size();
  Vec y(c, 0.0);
  for (size_t j = 0; j < c; ++j) {
    for (size_t k = 0; k < c; ++k) y[j] += w[j * c + k] * x[k];
    y[j] = std::tanh(y[j]);
  }
  return y;
}

// Mean cross-entropy of logits (1, T, V) against targets (T).
inline double CrossEntropyLoop(const torch::Tensor& logits, const std::vector<int64_t>& targets) {
  const int64_t t_len = logits.size(1), v_len = logits.size(2);
  const Vec l = Values(logits);
  double total = 0;
  for (int64_t t = 0; t < t_len; ++t) {
    double sum = 0;
    for (int64_t v = 0; v < v_len; ++v) sum += std::exp(l[t * v_len + v]);
    total += std::log(sum) - l[t * v_len + targets[t]];
  }
  return total / static_cast<double>(t_len);
}

}  // namespace spheret::nn::reference
