#include "worker/train/optimizer.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "worker/train/shard_pool.h"

namespace spheret::train {
namespace {

// Two parameter groups (decay and no decay, as the trainer builds them) with fixed gradients.
struct Problem {
  std::vector<torch::Tensor> params;
  std::vector<torch::optim::OptimizerParamGroup> Groups() const {
    auto options = [](double wd) {
      return std::make_unique<torch::optim::AdamWOptions>(
          torch::optim::AdamWOptions(3e-2).betas({0.9, 0.99}).weight_decay(wd));
    };
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(std::vector<torch::Tensor>{params[0], params[1]}, options(0.1));
    groups.emplace_back(std::vector<torch::Tensor>{params[2]}, options(0.0));
    return groups;
  }
};

Problem MakeProblem() {
  torch::manual_seed(7);
  Problem problem;
  for (auto shape : {std::vector<int64_t>{8, 5}, {3, 4}, {6}}) {
    problem.params.push_back(torch::randn(shape, torch::kDouble).requires_grad_());
  }
  return problem;
}

void SetGrads(const Problem& problem, int step) {
  for (size_t i = 0; i < problem.params.size(); ++i) {
    const torch::Tensor& p = problem.params[i];
    p.mutable_grad() = torch::sin(p.detach() * (step + 1) + static_cast<double>(i));
  }
}

TEST(FusedAdamWTest, MatchesTorchAdamWOverManySteps) {
  Problem fused_problem = MakeProblem(), plain_problem = MakeProblem();
  FusedAdamW fused(fused_problem.Groups(), torch::optim::AdamWOptions(3e-2));
  torch::optim::AdamW plain(plain_problem.Groups(), torch::optim::AdamWOptions(3e-2));
  for (int step = 0; step < 50; ++step) {
    SetGrads(fused_problem, step);
    SetGrads(plain_problem, step);
    fused.step();
    plain.step();
  }
  for (size_t i = 0; i < fused_problem.params.size(); ++i) {
    EXPECT_TRUE(torch::allclose(fused_problem.params[i], plain_problem.params[i], 1e-12, 1e-12))
        << "parameter " << i << " differs by "
        << (fused_problem.params[i] - plain_problem.params[i]).abs().max().item<double>();
  }
}

TEST(FusedAdamWTest, ParallelPartsUpdateEveryParameterExactlyAsOneCall) {
  Problem serial_problem = MakeProblem(), parallel_problem = MakeProblem();
  FusedAdamW serial(serial_problem.Groups(), torch::optim::AdamWOptions(3e-2));
  FusedAdamW parallel(parallel_problem.Groups(), torch::optim::AdamWOptions(3e-2));
  ShardPool pool(3, 1);  // More parts than the second group has parameters.
  parallel.SetParallel(3, [&](const std::function<void(int)>& part) { pool.Run(part); });
  for (int step = 0; step < 20; ++step) {
    SetGrads(serial_problem, step);
    SetGrads(parallel_problem, step);
    serial.step();
    parallel.step();
  }
  for (size_t i = 0; i < serial_problem.params.size(); ++i) {
    EXPECT_TRUE(torch::equal(serial_problem.params[i], parallel_problem.params[i])) << i;
  }
}

TEST(FusedAdamWTest, StateSavedByEitherLoadsIntoTheOther) {
  Problem a = MakeProblem(), b = MakeProblem();
  FusedAdamW fused(a.Groups(), torch::optim::AdamWOptions(3e-2));
  for (int step = 0; step < 5; ++step) {
    SetGrads(a, step);
    fused.step();
  }
  torch::serialize::OutputArchive out;
  fused.save(out);
  std::ostringstream bytes;
  out.save_to(bytes);

  for (size_t i = 0; i < a.params.size(); ++i) b.params[i].detach().copy_(a.params[i].detach());
  torch::optim::AdamW plain(b.Groups(), torch::optim::AdamWOptions(3e-2));
  torch::serialize::InputArchive in;
  std::istringstream stream(bytes.str());
  in.load_from(stream);
  plain.load(in);
  SetGrads(a, 5);
  SetGrads(b, 5);
  fused.step();
  plain.step();
  for (size_t i = 0; i < a.params.size(); ++i) {
    EXPECT_TRUE(torch::allclose(a.params[i], b.params[i], 1e-12, 1e-12)) << "parameter " << i;
  }
}

TEST(FusedAdamWTest, ParametersWithoutGradientsAreLeftAlone) {
  Problem problem = MakeProblem();
  const torch::Tensor before = problem.params[2].detach().clone();
  FusedAdamW fused(problem.Groups(), torch::optim::AdamWOptions(3e-2));
  SetGrads(problem, 0);
  problem.params[2].mutable_grad() = torch::Tensor();
  fused.step();
  EXPECT_TRUE(torch::equal(problem.params[2], before));
  EXPECT_FALSE(torch::equal(problem.params[0], MakeProblem().params[0]));
}

}  // namespace
}  // namespace spheret::train
