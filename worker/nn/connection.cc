#include "worker/nn/connection.h"

#include <torch/torch.h>

#include <stdexcept>
#include <string>

#include "protocol/metric_catalog.h"
#include "worker/nn/autonorm.h"
#include "worker/nn/euclidean_connections.h"
#include "worker/nn/ngpt.h"
#include "worker/nn/norms.h"
#include "worker/nn/scripted_connection.h"
#include "worker/nn/sphere_connection.h"
#include "worker/nn/stability.h"

namespace spheret::nn {
namespace {

thread_local bool composite_mode = false;

void CheckOptions(const ConnectionOptions& options) {
  const absl::Status error = ValidateConnectionOptions(options);
  if (!error.ok()) throw std::invalid_argument(std::string(error.message()));
}

}  // namespace

void RecordTokenCollapse(const torch::Tensor& h, ConnectionDiagnostics* diagnostics) {
  const TokenCollapse collapse = MeasureTokenCollapse(h);
  diagnostics->extra.emplace_back(protocol::kTokenCos, collapse.mean_cos);
  diagnostics->extra.emplace_back(protocol::kEffRank, collapse.effective_rank);
}

CompositeModeGuard::CompositeModeGuard() : previous_(composite_mode) { composite_mode = true; }
CompositeModeGuard::~CompositeModeGuard() { composite_mode = previous_; }
bool CompositeMode() { return composite_mode; }

Connection MakeConnection(const ConnectionOptions& options, const SublayerPosition& position) {
  CheckOptions(options);
  if (position.block < 1 || position.block > options.n_layer ||
      (position.sublayer != 0 && position.sublayer != 1)) {
    throw std::invalid_argument("connection position must be block in [1, " +
                                std::to_string(options.n_layer) + "] and sublayer 0 or 1, got " +
                                std::to_string(position.block) + "/" +
                                std::to_string(position.sublayer));
  }
  switch (options.method) {
    case Method::kPreLn:
    case Method::kPreDyt:
      return std::make_shared<PreNormConnectionImpl>(options);
    case Method::kPostLn:
      return std::make_shared<PostLnConnectionImpl>(options);
    case Method::kPeriLn:
      return std::make_shared<PeriLnConnectionImpl>(options);
    case Method::kKeel:
      return std::make_shared<KeelConnectionImpl>(options);
    case Method::kGeoNorm:
    case Method::kProjSpheret:
    case Method::kCaySpheret:
    case Method::kPSpheret:
      return std::make_shared<SpheretConnectionImpl>(options, position);
    case Method::kNgpt:
      return std::make_shared<NgptConnectionImpl>(options);
    case Method::kAutoNorm:
      return std::make_shared<AutoNormConnectionImpl>(options);
    case Method::kScripted:
      return MakeScriptedConnection(options, position);
  }
  throw std::invalid_argument("unknown method");
}

torch::nn::AnyModule MakeEmbeddingNorm(const ConnectionOptions& options) {
  CheckOptions(options);
  if (ScaleNormOn(options)) {
    return torch::nn::AnyModule(
        ScaleNorm(ScaleNormOptions{options.n_embd, options.radius_param, options.fused}));
  }
  if (options.method == Method::kNgpt) return torch::nn::AnyModule(UnitNorm());
  return torch::nn::AnyModule(torch::nn::Identity());
}

torch::nn::AnyModule MakeFinalNorm(const ConnectionOptions& options) {
  CheckOptions(options);
  if (options.method == Method::kNgpt) return torch::nn::AnyModule(torch::nn::Identity());
  if (options.method == Method::kPreDyt && options.final_norm == NormKind::kLayerNorm) {
    return torch::nn::AnyModule(
        Dyt(DytOptions{options.n_embd, options.bias, options.dyt_alpha_init}));
  }
  return MakeNorm(options.final_norm, options.n_embd, options.bias);
}

}  // namespace spheret::nn
