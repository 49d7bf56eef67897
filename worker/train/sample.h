// Text generation from a run's checkpoint, as nanoGPT's sample.py: the last block_size tokens
// are fed back, logits / temperature, the top_k most likely kept, then one token drawn.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace spheret::train {

struct SampleOptions {
  std::string run_dir;        // A `spheret-lm train --out` folder: config.json and ckpt.pt.
  std::string prompt = "\n";  // Start text (byte-level data sets).
  int64_t tokens = 200;       // New tokens to draw.
  double temperature = 0.8;   // > 0; below 1 sharpens the distribution.
  int64_t top_k = 200;        // Keep the k most likely tokens; 0 keeps all.
  int64_t seed = 1337;
};

// Writes the prompt and its continuation to *text; InvalidArgument names what failed.
// Decodes byte-level and GPT-2 BPE data sets (the run's data set folder must be reachable).
absl::Status Sample(const SampleOptions& options, std::string* text);

}  // namespace spheret::train
