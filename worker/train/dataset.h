// Batches of a token data set (worker/text/data_files.h) as nanoGPT's get_batch draws them.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <utility>

#include "absl/status/statusor.h"
#include "worker/text/data_files.h"

namespace spheret::train {

// x, y: (batch, block) int64, y = x shifted by one token, windows starting at uniform random
// offsets in [0, size - block) drawn from `generator`; TokenFile::Read's error when a window
// cannot be read. Precondition: tokens.size() > block.
absl::StatusOr<std::pair<torch::Tensor, torch::Tensor>> SampleBatch(const TokenFile& tokens,
                                                                    int64_t batch, int64_t block,
                                                                    torch::Generator& generator);

}  // namespace spheret::train
