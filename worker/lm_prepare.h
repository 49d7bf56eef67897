// spheret-lm's `prepare`: text files or JSONL into a token data set (worker/text/prepare.h), with
// a progress bar and the tokens/s it reached on stderr and a `prepared` event on stdout.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "worker/text/prepare.h"
#include "worker/train/events.h"

namespace spheret::lm {

struct PrepareCommand {
  CLI::App* command = nullptr;
  std::string builtin;
  train::PrepareOptions options;
};

// Adds `prepare` to `app`; `command` must outlive parsing.
void AddPrepareCommand(CLI::App& app, PrepareCommand* command);
// 0, or the error exit code after one `spheret-lm: error:` line and an error event.
int RunPrepare(PrepareCommand& command, train::EventWriter& events);

}  // namespace spheret::lm
