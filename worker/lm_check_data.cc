#include "worker/lm_check_data.h"

#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <map>

#include "absl/strings/str_cat.h"
#include "protocol/trainer_events.h"
#include "worker/text/data_files.h"

namespace spheret::lm {
namespace {

constexpr int64_t kProgressTokens = 16 << 20;  // files of more tokens get a progress line

}  // namespace

void AddCheckDataCommand(CLI::App& app, CheckDataCommand* check) {
  check->command = app.add_subcommand(
      "check-data", "check a data set: meta.json, whole tokens, every id below vocab_size");
  check->command->add_option("--data", check->data_dir, "data set folder (train.bin, val.bin)")
      ->required()
      ->check(CLI::ExistingDirectory);
}

int RunCheckData(const CheckDataCommand& command, train::EventWriter& events) {
  const bool terminal = isatty(STDERR_FILENO) != 0;
  std::map<std::string, int64_t> shown;  // per file: the last tenth shown
  const auto progress = [&](const std::string& file, int64_t done, int64_t total) {
    if (total < kProgressTokens) return;
    const int64_t tenth = done * 10 / total;
    if (!terminal && shown.count(file) > 0 && shown[file] == tenth) return;
    shown[file] = tenth;
    std::fprintf(stderr, "%scheck-data %s: %3.0f%% of %lld tokens%s", terminal ? "\r" : "",
                 file.c_str(), 100.0 * static_cast<double>(done) / static_cast<double>(total),
                 static_cast<long long>(total), terminal && done < total ? "" : "\n");
  };
  train::DatasetMeta meta;
  if (absl::Status error = train::CheckDataset(command.data_dir, progress, &meta); !error.ok()) {
    const std::string message = absl::StrCat("check-data: ", error.message());
    std::cerr << "spheret-lm: error: " << message << std::endl;
    events.Error(message);
    return protocol::kExitError;
  }
  std::cout << command.data_dir << ": ok: vocab_size " << meta.vocab_size
            << (meta.path.empty() ? " (GPT-2's, no meta.json)" : " from " + meta.path)
            << ", every id of train.bin and val.bin below it"
            << (meta.train_tokens >= 0
                    ? absl::StrCat(", ", meta.train_tokens, " train and ", meta.val_tokens,
                                   " val tokens as stated")
                    : std::string(", no token counts stated (prepared before they were)"))
            << std::endl;
  return 0;
}

}  // namespace spheret::lm
