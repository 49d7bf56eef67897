#include "worker/eval/scorer.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <numeric>
#include <ostream>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "worker/nn/gpt.h"
#include "worker/text/python_text.h"
#include "worker/train/autocast.h"
#include "worker/train/run_folder.h"

namespace spheret::eval {
namespace {

using Tokens = std::vector<int64_t>;

// One scored window: the model reads seq[0 .. n-2] and the last `cont_len` tokens of seq are
// the continuation whose log-probability is summed.
struct Row {
  Tokens seq;
  int64_t cont_len = 0;
};

// What one forward pass gave at each position p: log P(seq[p+1] | seq[..p]) and whether
// seq[p+1] was the argmax.
struct PositionScores {
  std::vector<double> logprob;
  std::vector<bool> greedy;
};

bool IsPrefix(const Tokens& a, const Tokens& b) {
  return a.size() <= b.size() && std::equal(a.begin(), a.end(), b.begin());
}

class TorchScorer : public Scorer {
 public:
  absl::Status Init(const ScorerOptions& options);
  absl::Status Score(const std::vector<Request>& requests, std::vector<Answer>* answers) override;
  int64_t step() const override { return step_; }
  int64_t block_size() const override { return config_.block_size; }

 private:
  absl::Status AddPair(Tokens context, const Tokens& continuation, std::vector<Row>* rows) const;
  absl::Status AddRequest(const Request& request, std::vector<Row>* rows) const;
  std::vector<PositionScores> Forward(const std::vector<const Tokens*>& batch,
                                      const std::vector<int64_t>& from);
  // The log-probability and greediness of each scored position (flat indexes into the
  // (B, width) `input`), in chunks of kHeadPositions through the head.
  void ReadOut(const torch::Tensor& input, const torch::Tensor& target,
               const std::vector<int64_t>& scored, torch::Tensor* logprob, torch::Tensor* greedy);
  absl::Status RunPasses(const std::vector<Row>& rows, const std::vector<size_t>& forward,
                         const std::vector<int64_t>& from, size_t requests,
                         std::vector<PositionScores>* scores);

  ScorerOptions options_;
  TrainConfig config_;
  train::Codec codec_;
  nn::Gpt model_{nullptr};
  int64_t step_ = 0;
  torch::Device device_ = torch::kCPU;
};

absl::Status TorchScorer::Init(const ScorerOptions& options) {
  options_ = options;
  SPHERET_RETURN_IF_ERROR(train::ReadRunConfig(options.run_dir, &config_));
  if (!options.data_root.empty()) config_.data_root = options.data_root;
  config_.device = options.device;
  SPHERET_RETURN_IF_ERROR(train::LoadCodec(config_, &codec_));
  SPHERET_RETURN_IF_ERROR(train::ResolveDevice(config_, /*local_rank=*/0, &device_));
  SPHERET_RETURN_IF_ERROR(train::LoadRunModel(options.run_dir, config_, &model_, &step_));
  model_->to(device_);
  return absl::OkStatus();
}

// The harness's _loglikelihood_tokens input: (context + continuation) cut from the left to
// block_size + 1 tokens; InvalidArgument where the harness asserts.
absl::Status TorchScorer::AddPair(Tokens context, const Tokens& continuation,
                                  std::vector<Row>* rows) const {
  const auto window = static_cast<size_t>(config_.block_size);
  if (context.empty()) return absl::InvalidArgumentError("the context encodes to no tokens");
  if (continuation.empty()) {
    return absl::InvalidArgumentError("the continuation encodes to no tokens");
  }
  if (continuation.size() > window) {
    return absl::InvalidArgumentError(absl::StrCat("the continuation is ", continuation.size(),
                                                   " tokens, above block_size ", window));
  }
  context.insert(context.end(), continuation.begin(), continuation.end());
  if (context.size() > window + 1) {
    context.erase(context.begin(), context.end() - static_cast<std::ptrdiff_t>(window + 1));
  }
  rows->push_back({std::move(context), static_cast<int64_t>(continuation.size())});
  return absl::OkStatus();
}

absl::Status TorchScorer::AddRequest(const Request& request, std::vector<Row>* rows) const {
  const int64_t prefix = codec_.PrefixToken();
  if (request.type == RequestType::kLoglikelihood) {
    if (request.context.empty())
      return AddPair({prefix}, codec_.Encode(request.continuation), rows);
    // _encode_pair: the context's trailing whitespace goes to the continuation; the continuation
    // is what encoding both adds to encoding the context.
    const std::string context = PythonRStrip(request.context);
    const std::string continuation = request.context.substr(context.size()) + request.continuation;
    Tokens context_ids = codec_.Encode(context);
    Tokens whole = codec_.Encode(context + continuation);
    const size_t cut = std::min(context_ids.size(), whole.size());
    return AddPair(std::move(context_ids), Tokens(whole.begin() + cut, whole.end()), rows);
  }
  // get_rolling_token_windows(prefix, max_seq_len = block_size, context_len = 1) made disjoint.
  const Tokens tokens = codec_.Encode(request.continuation);
  const auto n = static_cast<int64_t>(tokens.size()), window = config_.block_size;
  if (n == 0) return absl::OkStatus();
  const int64_t first = std::min(window, n);
  SPHERET_RETURN_IF_ERROR(AddPair({prefix}, Tokens(tokens.begin(), tokens.begin() + first), rows));
  for (int64_t predicted = first; predicted < n;) {
    const int64_t length = std::min(n - predicted, window), end = predicted + length;
    SPHERET_RETURN_IF_ERROR(
        AddPair(Tokens(tokens.begin() + (end - window - 1), tokens.begin() + (end - length)),
                Tokens(tokens.begin() + (end - length), tokens.begin() + end), rows));
    predicted += length;
  }
  return absl::OkStatus();
}

// The readout only where a continuation is scored, positions `from[b]` on of row b (a context
// is read, not scored), in chunks of this many positions: a GPT-2 head makes 200 KB of logits a
// position, so a chunk's logits are 26 MB, where a whole pass's were 1.6 GB (8,192 tokens).
constexpr int64_t kHeadPositions = 128;

// Whether each position's target is its argmax, the first largest logit as the harness takes it:
// a max reduction finds the positions whose target's logit is the largest (3.4x faster than an
// index-tracking one on 128 x 50257 logits), and argmax runs on those only.
torch::Tensor Greedy(const torch::Tensor& logits, const torch::Tensor& target) {
  torch::Tensor greedy = logits.gather(-1, target.unsqueeze(-1)).squeeze(-1).eq(logits.amax(-1));
  const torch::Tensor top = greedy.nonzero().squeeze(-1);
  if (top.numel() > 0) {
    greedy.index_put_({top},
                      logits.index_select(0, top).argmax(-1).eq(target.index_select(0, top)));
  }
  return greedy;
}

// Row b's tokens as `input` (all but the last) and `target` (all but the first), (B, width)
// each, zero-padded; returns the flat index b * width + p of each scored position (p >= from[b]).
std::vector<int64_t> PackRows(const std::vector<const Tokens*>& batch,
                              const std::vector<int64_t>& from, int64_t width, torch::Tensor* input,
                              torch::Tensor* target) {
  const auto rows = static_cast<int64_t>(batch.size());
  *input = torch::zeros({rows, width}, torch::kLong);
  *target = torch::zeros({rows, width}, torch::kLong);
  auto in = input->accessor<int64_t, 2>();
  auto out = target->accessor<int64_t, 2>();
  std::vector<int64_t> scored;  // b * width + p of each scored position
  for (int64_t b = 0; b < rows; ++b) {
    const Tokens& seq = *batch[b];
    for (size_t p = 0; p + 1 < seq.size(); ++p) {
      in[b][static_cast<int64_t>(p)] = seq[p];
      out[b][static_cast<int64_t>(p)] = seq[p + 1];
      if (static_cast<int64_t>(p) >= from[b]) scored.push_back(b * width + static_cast<int64_t>(p));
    }
  }
  return scored;
}

// Each row's scores from those of the scored positions (PackRows' flat indexes).
std::vector<PositionScores> UnpackScores(const std::vector<const Tokens*>& batch,
                                         const std::vector<int64_t>& scored, int64_t width,
                                         const torch::Tensor& logprob,
                                         const torch::Tensor& greedy) {
  std::vector<PositionScores> scores(batch.size());
  for (size_t b = 0; b < batch.size(); ++b) {
    const auto positions = static_cast<size_t>(batch[b]->size()) - 1;
    scores[b].logprob.assign(positions, 0.0);  // unscored positions stay 0 and are never read
    scores[b].greedy.assign(positions, false);
  }
  auto lp = logprob.accessor<double, 1>();
  auto gr = greedy.accessor<bool, 1>();
  for (size_t k = 0; k < scored.size(); ++k) {
    PositionScores& row = scores[scored[k] / width];
    row.logprob[scored[k] % width] = lp[static_cast<int64_t>(k)];
    row.greedy[scored[k] % width] = gr[static_cast<int64_t>(k)];
  }
  return scores;
}

std::vector<PositionScores> TorchScorer::Forward(const std::vector<const Tokens*>& batch,
                                                 const std::vector<int64_t>& from) {
  const auto width = static_cast<int64_t>(batch.front()->size()) - 1;
  torch::Tensor input, target;
  const std::vector<int64_t> scored = PackRows(batch, from, width, &input, &target);
  const auto n = static_cast<int64_t>(scored.size());
  torch::Tensor logprob = torch::zeros({n}, torch::kDouble),
                greedy = torch::zeros({n}, torch::kBool);
  if (n > 0) ReadOut(input, target, scored, &logprob, &greedy);
  return UnpackScores(batch, scored, width, logprob, greedy);
}

void TorchScorer::ReadOut(const torch::Tensor& input, const torch::Tensor& target,
                          const std::vector<int64_t>& scored, torch::Tensor* logprob,
                          torch::Tensor* greedy) {
  const auto n = static_cast<int64_t>(scored.size());
  const int64_t rows = input.size(0), width = input.size(1);
  torch::NoGradGuard no_grad;
  train::CudaAutocast autocast(options_.bf16 && device_.is_cuda());
  const torch::Tensor index = torch::tensor(scored, torch::kLong).to(device_);
  const torch::Tensor h = model_->hidden(input.to(device_));  // (B, T, C)
  const torch::Tensor picked = h.reshape({rows * width, h.size(-1)}).index_select(0, index);
  const torch::Tensor next = target.to(device_).reshape({-1}).index_select(0, index);
  std::vector<torch::Tensor> logprobs, greedys;
  for (int64_t start = 0; start < n; start += kHeadPositions) {
    const int64_t count = std::min(kHeadPositions, n - start);
    const torch::Tensor want = next.narrow(0, start, count).unsqueeze(-1);
    const torch::Tensor logits =
        model_->head(picked.narrow(0, start, count).unsqueeze(0)).squeeze(0).to(torch::kFloat);
    logprobs.push_back(logits.log_softmax(-1).gather(-1, want).squeeze(-1));
    greedys.push_back(Greedy(logits, want.squeeze(-1)));
  }
  *logprob = torch::cat(logprobs).to(torch::kCPU, torch::kDouble);
  *greedy = torch::cat(greedys).to(torch::kCPU);
}

// The order of the passes: every distinct sequence not a prefix of another, longest first.
// Depends on the set of rows only, so `eval` and `score` over the same requests compute the
// same batches and give the same bits.
std::vector<size_t> ForwardRows(const std::vector<Row>& rows, std::vector<size_t>* owner) {
  std::vector<size_t> order(rows.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return rows[a].seq < rows[b].seq; });
  owner->assign(rows.size(), 0);
  std::vector<size_t> forward;
  for (size_t k = order.size(); k-- > 0;) {  // a prefix sorts right before its extensions
    const size_t row = order[k];
    if (k + 1 < order.size() && IsPrefix(rows[row].seq, rows[order[k + 1]].seq)) {
      (*owner)[row] = (*owner)[order[k + 1]];
    } else {
      (*owner)[row] = row;
      forward.push_back(row);
    }
  }
  std::stable_sort(forward.begin(), forward.end(), [&](size_t a, size_t b) {
    return rows[a].seq.size() != rows[b].seq.size() ? rows[a].seq.size() > rows[b].seq.size()
                                                    : rows[a].seq < rows[b].seq;
  });
  return forward;
}

// The forward passes over `forward` (rows longest first) in batches of about batch_tokens, with
// a progress line every 5 s; the scores of each pass, by row.
absl::Status TorchScorer::RunPasses(const std::vector<Row>& rows,
                                    const std::vector<size_t>& forward,
                                    const std::vector<int64_t>& from, size_t requests,
                                    std::vector<PositionScores>* out) {
  std::vector<PositionScores>& scores = *out;
  scores.assign(rows.size(), {});
  const auto start = std::chrono::steady_clock::now();
  auto last_report = start;
  int64_t tokens_done = 0;
  for (size_t begin = 0; begin < forward.size();) {
    if (options_.stop != nullptr && options_.stop->load()) {
      return absl::CancelledError("zero-shot scoring stopped by a signal");
    }
    const size_t width = rows[forward[begin]].seq.size();
    size_t end = begin + 1;
    while (end < forward.size() &&
           (end - begin + 1) * width <= static_cast<size_t>(options_.batch_tokens))
      ++end;
    std::vector<const Tokens*> batch;
    std::vector<int64_t> batch_from;
    for (size_t k = begin; k < end; ++k) {
      batch.push_back(&rows[forward[k]].seq);
      batch_from.push_back(from[forward[k]]);
    }
    std::vector<PositionScores> got = Forward(batch, batch_from);
    for (size_t k = begin; k < end; ++k) {
      tokens_done += static_cast<int64_t>(rows[forward[k]].seq.size()) - 1;
      scores[forward[k]] = std::move(got[k - begin]);
    }
    begin = end;
    const auto now = std::chrono::steady_clock::now();
    if (options_.progress != nullptr &&
        (now - last_report > std::chrono::seconds(5) || begin == forward.size())) {
      const double seconds = std::chrono::duration<double>(now - start).count();
      *options_.progress << absl::StrFormat(
          "spheret-lm: scored %d/%d passes (%d requests, %d windows) in %.1f s: %.0f tokens/s, "
          "%.1f requests/s on %d threads\n",
          begin, forward.size(), requests, rows.size(), seconds,
          tokens_done / std::max(seconds, 1e-9),
          static_cast<double>(requests) * begin / forward.size() / std::max(seconds, 1e-9),
          torch::get_num_threads());
      last_report = now;
    }
  }
  return absl::OkStatus();
}

absl::Status TorchScorer::Score(const std::vector<Request>& requests,
                                std::vector<Answer>* answers) {
  // All intra-op threads, also after a training run's ShardPool set this thread's to one.
  const int threads = torch::get_num_threads();
  at::set_num_threads(train::StartingThreads());
  const absl::Cleanup restore = [threads] { at::set_num_threads(threads); };
  std::vector<Row> rows;
  std::vector<size_t> first_row(requests.size() + 1, 0);
  for (size_t i = 0; i < requests.size(); ++i) {
    first_row[i] = rows.size();
    SPHERET_RETURN_IF_ERROR(
        Annotate(absl::StrCat("request ", i + 1), AddRequest(requests[i], &rows)));
  }
  first_row[requests.size()] = rows.size();
  std::vector<size_t> owner;
  const std::vector<size_t> forward = ForwardRows(rows, &owner);
  // Each pass scores from the first continuation position of the rows it answers for.
  std::vector<int64_t> from(rows.size(), std::numeric_limits<int64_t>::max());
  for (size_t r = 0; r < rows.size(); ++r) {
    const auto first = static_cast<int64_t>(rows[r].seq.size()) - 1 - rows[r].cont_len;
    from[owner[r]] = std::min(from[owner[r]], first);
  }
  std::vector<PositionScores> scores;
  SPHERET_RETURN_IF_ERROR(RunPasses(rows, forward, from, requests.size(), &scores));
  answers->assign(requests.size(), Answer{});
  for (size_t i = 0; i < requests.size(); ++i) {
    Answer& answer = (*answers)[i];
    answer.is_greedy = requests[i].type == RequestType::kLoglikelihood;
    for (size_t r = first_row[i]; r < first_row[i + 1]; ++r) {
      const PositionScores& pass = scores[owner[r]];
      const auto n = static_cast<int64_t>(rows[r].seq.size());
      for (int64_t p = n - 1 - rows[r].cont_len; p < n - 1; ++p) {
        answer.loglikelihood += pass.logprob[p];
        answer.is_greedy = answer.is_greedy && pass.greedy[p];
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Scorer>> Scorer::Open(const ScorerOptions& options) {
  auto scorer = std::make_unique<TorchScorer>();
  SPHERET_RETURN_IF_ERROR(scorer->Init(options));
  return scorer;
}

}  // namespace spheret::eval
