#include "tests/worker/nn/trained_tiny.h"

#include <map>
#include <tuple>

namespace spheret::nn::testing {
namespace {

using Key = std::tuple<int, double, double, int, int, int64_t, int>;

TrainedTiny Train(const ConnectionOptions& connection, int64_t seed, int steps) {
  torch::manual_seed(seed);
  GptConfig config;
  config.vocab_size = 13;
  config.block_size = 4;
  config.n_layer = 2;
  config.n_head = 2;
  config.n_embd = 6;
  config.connection = connection;
  config.bias = connection.method != Method::kNgpt;  // nGPT has no biases
  TrainedTiny tiny{Gpt(config), torch::randint(0, 13, {4, 4}, torch::kLong), torch::Tensor()};
  tiny.model->to(torch::kDouble);
  torch::optim::Adam adam(tiny.model->parameters(), torch::optim::AdamOptions(3e-2));
  const torch::Tensor targets = torch::randint(0, 13, {4, 4}, torch::kLong);
  for (int step = 0; step < steps; ++step) {
    adam.zero_grad();
    tiny.model->loss(tiny.idx, targets).backward();
    adam.step();
    tiny.model->NormalizeWeights();
  }
  tiny.model->eval();
  tiny.idx = tiny.idx.narrow(0, 0, 1);  // (1, 4)
  ForwardRecord record;
  record.keep_block_inputs = true;
  torch::NoGradGuard no_grad;
  tiny.model->hidden(tiny.idx, &record);
  tiny.block_input = record.block_inputs[0];  // (1, 4, 6)
  return tiny;
}

}  // namespace

const TrainedTiny& BrieflyTrained(const ConnectionOptions& connection, int64_t seed, int steps) {
  static auto* trained = new std::map<Key, TrainedTiny>();
  const Key key{static_cast<int>(connection.method),
                connection.p,
                connection.angle_max,
                static_cast<int>(connection.decay),
                static_cast<int>(connection.inner_norm),
                seed,
                steps};
  auto it = trained->find(key);
  if (it == trained->end()) it = trained->emplace(key, Train(connection, seed, steps)).first;
  return it->second;
}

}  // namespace spheret::nn::testing
