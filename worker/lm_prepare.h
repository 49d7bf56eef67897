// `prepare`: text files or JSONL into a token data set (worker/text/prepare.h), with a progress
// bar and the tokens/s it reached on stderr and a `prepared` event on stdout. One implementation,
// two programs: spheret-lm's `prepare` command and spheret-prepare (worker/prepare_main.cc), which
// takes the same options without LibTorch (no operator registration at start-up).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "protocol/event_writer.h"
#include "worker/text/prepare.h"

namespace spheret::lm {

struct PrepareCommand {
  CLI::App* command = nullptr;
  std::string program = "spheret-lm";  // the name in its messages
  std::string builtin;
  train::PrepareOptions options;
};

// Adds prepare's options to `command` (spheret-lm's subcommand, or spheret-prepare's app), which
// becomes prepare->command; `prepare` must outlive parsing.
void AddPrepareOptions(CLI::App* command, PrepareCommand* prepare);
// Adds `prepare` to `app` with AddPrepareOptions.
void AddPrepareCommand(CLI::App& app, PrepareCommand* prepare);
// 0, or the error exit code after one `PROGRAM: error:` line and an error event.
int RunPrepare(PrepareCommand& command, protocol::EventWriter& events);

}  // namespace spheret::lm
