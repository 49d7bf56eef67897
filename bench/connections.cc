// bench/connections: forward + backward time of every deep connection on a (B, T, C) CPU input,
// relative to pre_ln (residual add + LayerNorm) measured in the same run, and the fused sphere
// update against the composite one. The sublayer F is a fixed cheap map (x + noise) so that the
// figures are the connection's own cost.
//
// Last, each update fused with the next LayerNorm (worker/nn/norm_fused.h) against the two apart,
// in alternating reps (so that load on a shared machine falls on both alike), and the causal
// attention from the packed q, k, v (worker/nn/attention_fused.h) against LibTorch's
// scaled_dot_product_attention on the split heads, as the GPT runs each.
//
//   bench_connections [--B 16] [--T 256] [--C 768] [--heads C/64] [--reps 20] [--threads N]
#include <malloc.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "worker/nn/attention_fused.h"
#include "worker/nn/connection.h"
#include "worker/nn/norm_fused.h"
#include "worker/nn/norms.h"
#include "worker/nn/sphere_fused.h"
#include "worker/nn/sphere_update.h"

namespace {

using spheret::ConnectionOptions;
using spheret::Method;

struct Args {
  int64_t batch = 16, time = 256, width = 768;
  int64_t heads = 0;  // 0: width / 64
  int reps = 20;
  int threads = 0;  // 0: LibTorch's default.
};

Args ParseArgs(int argc, char** argv) {
  Args args;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const long value = std::strtol(argv[i + 1], nullptr, 10);
    if (flag == "--B")
      args.batch = value;
    else if (flag == "--T")
      args.time = value;
    else if (flag == "--C")
      args.width = value;
    else if (flag == "--heads")
      args.heads = value;
    else if (flag == "--reps")
      args.reps = static_cast<int>(value);
    else if (flag == "--threads")
      args.threads = static_cast<int>(value);
    else {
      std::fprintf(stderr, "unknown flag %s (valid: --B --T --C --heads --reps --threads)\n",
                   flag.c_str());
      std::exit(2);
    }
  }
  return args;
}

// Median wall time in ms of `step` over `reps` runs after 3 warm-ups.
double MedianMs(const std::function<void()>& step, int reps) {
  for (int i = 0; i < 3; ++i) step();
  std::vector<double> times;
  for (int i = 0; i < reps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    step();
    times.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
  }
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  return times[times.size() / 2];
}

// Medians in ms of `a` and `b` over `reps` alternating runs each, after 3 warm-ups of each.
std::pair<double, double> AlternatingMedianMs(const std::function<void()>& a,
                                              const std::function<void()>& b, int reps) {
  std::vector<double> times[2];
  for (int i = 0; i < reps + 3; ++i) {
    for (int k = 0; k < 2; ++k) {
      const auto start = std::chrono::steady_clock::now();
      (k == 0 ? a : b)();
      const auto end = std::chrono::steady_clock::now();
      if (i >= 3)
        times[k].push_back(std::chrono::duration<double, std::milli>(end - start).count());
    }
  }
  for (auto& t : times) std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
  return {times[0][times[0].size() / 2], times[1][times[1].size() / 2]};
}

// The update (h + F, or the sphere update of `rule`) and the next LayerNorm, fwd+bwd with a
// gradient on both outputs: fused against apart.
void BenchUpdateAndNorm(const torch::Tensor& h0, const torch::Tensor& f0,
                        const torch::Tensor& grad_out, int reps) {
  std::printf(
      "\nupdate + next LayerNorm, fwd+bwd (both outputs get a gradient):\n"
      "%-14s %12s %12s %9s\n",
      "update", "fused ms", "apart ms", "speedup");
  spheret::nn::LayerNorm norm(h0.size(-1), true);
  const torch::Tensor h = h0.clone().requires_grad_(), f = f0.clone().requires_grad_();
  const torch::Tensor alpha = torch::full({}, 0.7).requires_grad_();
  for (Method method : {Method::kPreLn, Method::kGeoNorm, Method::kProjSpheret, Method::kCaySpheret,
                        Method::kPSpheret}) {
    const bool sphere = method != Method::kPreLn;
    const spheret::nn::SphereRule rule{method, 0.5, 0.7853981633974483};
    auto run = [&](bool fused) {
      for (const torch::Tensor& leaf : {h, f, alpha}) leaf.mutable_grad() = torch::Tensor();
      norm->zero_grad();
      spheret::nn::UpdateAndNorm r;
      if (fused) {
        r = sphere ? spheret::nn::SphereUpdateLayerNormFused(h, f, alpha, rule, *norm)
                   : spheret::nn::AddLayerNormFused(h, f, *norm);
      } else {
        r.out = sphere ? spheret::nn::SphereUpdateFused(h, f, alpha, rule) : h + f;
        r.normed = norm->forward(r.out);
      }
      torch::autograd::backward({r.out, r.normed}, {grad_out, grad_out});
    };
    const auto [fused, apart] = AlternatingMedianMs([&] { run(true); }, [&] { run(false); }, reps);
    std::printf("%-14s %12.3f %12.3f %8.2fx\n", sphere ? spheret::MethodId(method).data() : "add",
                fused, apart, apart / fused);
  }
}

// Causal attention from c_attn's output qkv (B, T, 3C) to the (B, T, C) that c_proj takes, fwd+bwd:
// fused against SDPA on the split, transposed heads (its output transposed back and made
// contiguous), in alternating reps.
void BenchAttention(int64_t batch, int64_t time, int64_t width, int64_t heads, int reps) {
  const int64_t hs = width / heads;
  std::printf(
      "\ncausal attention from packed q, k, v, fwd+bwd, %ld heads of %ld:\n%-14s %12s %12s %9s\n",
      static_cast<long>(heads), static_cast<long>(hs), "T", "fused ms", "sdpa ms", "speedup");
  torch::manual_seed(3);
  const torch::Tensor qkv = torch::randn({batch, time, 3 * width}).requires_grad_();
  const torch::Tensor grad = torch::randn({batch, time, width});
  if (!spheret::nn::AttentionFusable(qkv, heads)) {
    std::printf("%-14ld (not fusable here)\n", static_cast<long>(time));
    return;
  }
  auto run = [&](bool fused) {
    qkv.mutable_grad() = torch::Tensor();
    torch::Tensor y;
    if (fused) {
      y = spheret::nn::CausalAttentionFused(qkv, heads);
    } else {
      std::vector<torch::Tensor> parts = qkv.split(width, 2);
      for (torch::Tensor& part : parts) part = part.view({batch, time, heads, hs}).transpose(1, 2);
      y = at::scaled_dot_product_attention(parts[0], parts[1], parts[2], {}, 0.0, true)
              .transpose(1, 2)
              .contiguous()
              .view({batch, time, width});
    }
    y.backward(grad);
  };
  const auto [fused, sdpa] = AlternatingMedianMs([&] { run(true); }, [&] { run(false); }, reps);
  std::printf("%-14ld %12.3f %12.3f %8.2fx\n", static_cast<long>(time), fused, sdpa, sdpa / fused);
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = ParseArgs(argc, argv);
  // As spheret-lm (worker/lm_main.cc): freed buffers stay in the heap for the next rep, not
  // returned to the kernel and zero-filled again.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_TOP_PAD, 64 << 20);
  if (args.threads > 0) torch::set_num_threads(args.threads);
  torch::manual_seed(0);
  std::printf("connections: B=%ld T=%ld C=%ld, fp32 CPU, %d threads, median of %d reps\n",
              static_cast<long>(args.batch), static_cast<long>(args.time),
              static_cast<long>(args.width), torch::get_num_threads(), args.reps);
  const torch::Tensor h0 = torch::randn({args.batch, args.time, args.width});
  const torch::Tensor noise = torch::randn_like(h0);
  const torch::Tensor grad_out = torch::randn_like(h0);
  const spheret::nn::Sublayer sublayer = [&](const torch::Tensor& x) { return x + noise; };

  std::printf("\n%-14s %12s %14s\n", "method", "fwd+bwd ms", "vs pre_ln");
  double baseline = 0;
  // The paper's Euclidean baselines and sphere family, in the registry's order.
  for (Method method :
       {Method::kPreLn, Method::kPostLn, Method::kPreDyt, Method::kPeriLn, Method::kKeel,
        Method::kGeoNorm, Method::kProjSpheret, Method::kCaySpheret, Method::kPSpheret}) {
    const char* id = spheret::MethodId(method).data();  // the registry's ids are literals
    ConnectionOptions options;
    options.method = method;
    options.n_embd = args.width;
    options.p = 0.5;
    spheret::nn::Connection connection = spheret::nn::MakeConnection(options, {1, 0});
    const torch::Tensor h = h0.clone().requires_grad_();
    const double ms = MedianMs(
        [&] {
          h.mutable_grad() = torch::Tensor();
          connection->zero_grad();
          connection->forward(h, sublayer).backward(grad_out);
        },
        args.reps);
    if (baseline == 0) baseline = ms;
    std::printf("%-14s %12.2f %13.2fx\n", id, ms, ms / baseline);
  }

  std::printf("\nsphere update alone (h, F given), fwd+bwd:\n%-14s %12s %14s %9s\n", "method",
              "fused ms", "composite ms", "speedup");
  for (Method method :
       {Method::kGeoNorm, Method::kProjSpheret, Method::kCaySpheret, Method::kPSpheret}) {
    const spheret::nn::SphereRule rule{method, 0.5, 0.7853981633974483};
    double ms[2];
    for (int k = 0; k < 2; ++k) {
      auto update = k == 0 ? &spheret::nn::SphereUpdateFused : &spheret::nn::SphereUpdateComposite;
      const torch::Tensor h = h0.clone().requires_grad_();
      const torch::Tensor f = noise.clone().requires_grad_();
      const torch::Tensor alpha = torch::full({}, 0.7).requires_grad_();
      ms[k] = MedianMs(
          [&] {
            for (const torch::Tensor& leaf : {h, f, alpha}) leaf.mutable_grad() = torch::Tensor();
            update(h, f, alpha, rule).backward(grad_out);
          },
          args.reps);
    }
    std::printf("%-14s %12.2f %14.2f %8.2fx\n", spheret::MethodId(method).data(), ms[0], ms[1],
                ms[1] / ms[0]);
  }
  BenchUpdateAndNorm(h0, noise, grad_out, args.reps);
  BenchAttention(args.batch, args.time, args.width,
                 args.heads > 0 ? args.heads : std::max<int64_t>(1, args.width / 64), args.reps);
  return 0;
}
