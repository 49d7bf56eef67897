// spheret-lm's model interop commands: `export` (a run's model as a Hugging Face GPT-2 folder,
// worker/train/hf_gpt2.h) and `logits` (the model's logits for given token ids, as a NumPy .npy
// file: what a test compares with another implementation's, or a researcher inspects).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "worker/train/events.h"

namespace spheret::lm {

struct ExportCommands {
  CLI::App* export_command = nullptr;
  CLI::App* logits = nullptr;
  std::string run, format = "hf-gpt2", out, ids;
};

// Adds `export` and `logits` to `app`; `commands` must outlive parsing.
void AddExportCommands(CLI::App& app, ExportCommands* commands);
// Runs the one that was given; -1 when neither was.
int RunExportCommand(ExportCommands& commands, train::EventWriter& events);

}  // namespace spheret::lm
