// spheret-lm's `check-data --data DIR`: checks a whole token data set (worker/text/data_files.h:
// meta.json consistent, train.bin and val.bin whole tokens in the counts meta.json states, every
// id below its vocab_size), with progress on stderr for large files and a verdict line on stdout.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "worker/train/events.h"

namespace spheret::lm {

struct CheckDataCommand {
  CLI::App* command = nullptr;
  std::string data_dir;
};

// Adds `check-data` to `app`; `command` must outlive parsing.
void AddCheckDataCommand(CLI::App& app, CheckDataCommand* command);
// 0 and "DIR: ok ..." on stdout, or the error exit code after one `spheret-lm: error:` line and
// an error event naming the file and what is wrong.
int RunCheckData(const CheckDataCommand& command, train::EventWriter& events);

}  // namespace spheret::lm
