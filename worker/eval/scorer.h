// Answers harness requests with a run's model, as lm-evaluation-harness's HF model answers them:
// the context's trailing whitespace moved into the continuation, context and continuation encoded
// together and apart, an empty context replaced by the prefix token, the input cut from the left
// to block_size, and loglikelihood_rolling's disjoint windows of block_size tokens. Fast: every
// window is one row, identical rows and rows that are a prefix of another share one forward pass,
// rows go longest first in batches of about `batch_tokens` tokens, bf16 autocast on CUDA.
#pragma once

#include <atomic>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/eval/tasks.h"

namespace spheret::eval {

struct ScorerOptions {
  std::string run_dir;
  std::string data_root;             // where the run's data set (its tokenizer) is; "" = the run's
  std::string device = "cpu";        // "cpu", "cuda" or "cuda:N"
  bool bf16 = true;                  // bf16 autocast on CUDA (CPU scores in float32)
  int64_t batch_tokens = 8192;       // tokens per forward pass
  std::ostream* progress = nullptr;  // a progress line, when given
  // Raised from outside (SIGTERM/SIGINT) to stop between passes: Score returns Cancelled.
  const std::atomic<bool>* stop = nullptr;
};

class Scorer {
 public:
  // Loads the run's config, tokenizer and checkpoint; errors name what is missing.
  static absl::StatusOr<std::unique_ptr<Scorer>> Open(const ScorerOptions& options);
  virtual ~Scorer() = default;
  // answers[i] answers requests[i]. InvalidArgument when a continuation encodes to no tokens or
  // to more than block_size.
  virtual absl::Status Score(const std::vector<Request>& requests,
                             std::vector<Answer>* answers) = 0;
  virtual int64_t step() const = 0;        // the checkpoint's step
  virtual int64_t block_size() const = 0;  // the model's context
};

}  // namespace spheret::eval
