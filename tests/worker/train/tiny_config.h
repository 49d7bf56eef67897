// A model and run small enough for unit tests: 2 layers x 32 wide, block 16, batch 4 x 2
// accumulation steps, 40 iterations with evaluations every 10. Not finalized. And the byte-level
// data set they train on.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "config/train_config.h"
#include "worker/text/prepare.h"

namespace spheret::train::testing {

inline TrainConfig TinyTrainConfig(const std::string& dataset) {
  TrainConfig config;
  config.dataset = dataset;
  config.n_layer = 2;
  config.n_head = 2;
  config.n_embd = 32;
  config.block_size = 16;
  config.batch_size = 4;
  config.gradient_accumulation_steps = 2;
  config.learning_rate = 3e-3;
  config.warmup_iters = 5;
  config.lr_decay_iters = 40;
  config.max_iters = 40;
  config.eval_interval = 10;
  config.eval_iters = 2;
  return config;
}

// 300 lines of text under dir/text (unless `keep_text`: the text there), prepared as a byte-level
// data set in dir/data.
inline absl::Status PrepareTinyData(const std::filesystem::path& dir, bool keep_text = false) {
  std::filesystem::create_directories(dir / "text");
  if (!keep_text) {
    std::ofstream text(dir / "text" / "a.txt");
    for (int i = 0; i < 300; ++i) text << "line " << i << ": sphere retraction normalization\n";
  }
  PrepareStats report;
  return PrepareText({{(dir / "text").string()}, (dir / "data").string(), 0.1, ""}, &report);
}

}  // namespace spheret::train::testing
