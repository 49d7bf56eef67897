#include "worker/lm_prepare.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>
#include <string>

#include "worker/lm_fail.h"

namespace spheret::lm {
namespace {

// A progress line on stderr: redrawn in place on a terminal, else one line per 10%.
std::function<void(int64_t, int64_t, int64_t)> PrepareProgress() {
  const bool terminal = isatty(STDERR_FILENO) != 0;
  const auto start = std::chrono::steady_clock::now();
  auto last_decile = std::make_shared<int64_t>(-1);
  return [=](int64_t done, int64_t total, int64_t tokens) {
    const double share = total > 0 ? std::min(1.0, static_cast<double>(done) / total) : 1.0;
    const auto decile = static_cast<int64_t>(share * 10);
    if (!terminal && decile == *last_decile) return;
    *last_decile = decile;
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const int width = 30, filled = static_cast<int>(share * width);
    char line[200];
    std::snprintf(
        line, sizeof(line), "prepare [%s%s] %3.0f%% %.0f of %.0f MB, %.1fM tokens, %.2fM tokens/s",
        std::string(filled, '#').c_str(), std::string(width - filled, '.').c_str(), 100 * share,
        done / 1e6, total / 1e6, tokens / 1e6, tokens / 1e6 / std::max(seconds, 1e-9));
    std::cerr << (terminal ? "\r" : "") << line << (terminal ? "" : "\n") << std::flush;
  };
}

}  // namespace

void AddPrepareCommand(CLI::App& app, PrepareCommand* prepare) {
  AddPrepareOptions(app.add_subcommand("prepare", "turn text into train.bin/val.bin/meta.json"),
                    prepare);
}

void AddPrepareOptions(CLI::App* command, PrepareCommand* prepare) {
  prepare->command = command;
  command->add_option("--builtin", prepare->builtin, "built-in corpus: fortunes");
  command
      ->add_option("--input", prepare->options.inputs, "text, JSONL or Parquet files, or folders")
      ->check(CLI::ExistingPath);
  command->add_option("--out", prepare->options.out_dir, "output folder")->required();
  command
      ->add_option("--val-fraction", prepare->options.val_fraction,
                   "share of documents (JSONL, Parquet) or of tokens (text files) for val")
      ->check(CLI::Range(0.0, 1.0));
  command
      ->add_option("--gpt2", prepare->options.gpt2_dir,
                   "tokenize with GPT-2 BPE: a folder with encoder.json and vocab.bpe")
      ->check(CLI::ExistingDirectory);
  command->add_option("--text-field", prepare->options.text_field,
                      "the documents' JSONL field or Parquet column (default text); given, every "
                      "input but .parquet files is read as JSONL");
  command->add_option("--threads", prepare->options.threads, "tokenizer threads (0: every core)")
      ->check(CLI::NonNegativeNumber);
  command
      ->add_option("--split-seed", prepare->options.split_seed,
                   "seed of the document-level train/val split (JSONL, Parquet)")
      ->capture_default_str();
  command
      ->add_option("--max-line-bytes", prepare->options.max_line_bytes,
                   "refuse a JSONL line or a Parquet value longer than this (read with bounded "
                   "memory; a Parquet page that must hold a longer value, or over 16 times "
                   "max(this, 64 MiB), is refused unread)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
}

int RunPrepare(PrepareCommand& command, protocol::EventWriter& events) {
  train::PrepareOptions& options = command.options;
  if (!command.builtin.empty()) {
    if (absl::Status error = train::BuiltinCorpusFiles(command.builtin, &options.inputs);
        !error.ok()) {
      return Fail(events, error, command.program);
    }
  }
  if (options.inputs.empty()) {
    return Fail(events, "prepare needs --builtin NAME or --input PATH", command.program);
  }
  train::PrepareStats report;
  options.progress = PrepareProgress();
  if (absl::Status error = train::PrepareText(options, &report); !error.ok()) {
    std::cerr << std::endl;
    return Fail(events, error, command.program);
  }
  const double tokens = static_cast<double>(report.train_tokens + report.val_tokens);
  const double rate = tokens / std::max(report.seconds, 1e-9);
  char speed[160];
  std::snprintf(speed, sizeof(speed), "%.2fM tokens/s on %d threads, %.2fM tokens/s per thread",
                rate / 1e6, report.threads, rate / 1e6 / report.threads);
  std::cerr << "\n"
            << command.program << ": prepared " << options.out_dir << " from " << report.files
            << " files, " << report.documents << " documents"
            << (report.parquet_nulls > 0
                    ? " (" + std::to_string(report.parquet_nulls) + " null Parquet values skipped)"
                    : "")
            << ": " << report.train_tokens << " train and " << report.val_tokens << " val tokens ("
            << (options.gpt2_dir.empty() ? "byte level, vocab 256" : "GPT-2 BPE") << ") in "
            << report.seconds << " s: " << speed << std::endl;
  events.Emit(protocol::PreparedEvent{options.out_dir, report.files, report.train_tokens,
                                      report.val_tokens});
  return 0;
}

}  // namespace spheret::lm
