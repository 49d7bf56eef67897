// bench/connections: forward + backward time of every deep connection on a (B, T, C) CPU input,
// relative to pre_ln (residual add + LayerNorm) measured in the same run, and the fused sphere
// update against the composite one. The sublayer F is a fixed cheap map (x + noise) so that the
// figures are the connection's own cost.
//
//   bench_connections [--B 16] [--T 256] [--C 768] [--reps 20] [--threads N]
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "worker/nn/connection.h"
#include "worker/nn/sphere_fused.h"
#include "worker/nn/sphere_update.h"

namespace {

using spheret::ConnectionOptions;
using spheret::Method;

struct Args {
  int64_t batch = 16, time = 256, width = 768;
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
    else if (flag == "--reps")
      args.reps = static_cast<int>(value);
    else if (flag == "--threads")
      args.threads = static_cast<int>(value);
    else {
      std::fprintf(stderr, "unknown flag %s (valid: --B --T --C --reps --threads)\n", flag.c_str());
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

}  // namespace

int main(int argc, char** argv) {
  const Args args = ParseArgs(argc, argv);
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
  return 0;
}
