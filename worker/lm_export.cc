#include "worker/lm_export.h"

#include <torch/torch.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/replacing_file.h"
#include "base/status_macros.h"
#include "worker/lm_fail.h"
#include "worker/train/hf_gpt2.h"
#include "worker/train/run_folder.h"

namespace spheret::lm {
namespace {

// Token ids from a JSON file: an array of equally long arrays of ids.
absl::Status ReadIds(const std::string& path, int64_t vocab_size, torch::Tensor* ids) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError("cannot read " + path);
  nlohmann::json json = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!json.is_array() || json.empty() || !json[0].is_array() || json[0].empty()) {
    return absl::InvalidArgumentError(path +
                                      ": expected [[id, ...], ...], sequences of one length");
  }
  const auto rows = static_cast<int64_t>(json.size());
  const auto cols = static_cast<int64_t>(json[0].size());
  *ids = torch::empty({rows, cols}, torch::kLong);
  auto view = ids->accessor<int64_t, 2>();
  for (int64_t r = 0; r < rows; ++r) {
    if (!json[r].is_array() || static_cast<int64_t>(json[r].size()) != cols)
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": sequence ", r, " is not ", cols, " ids long like the first"));
    for (int64_t c = 0; c < cols; ++c) {
      const nlohmann::json& id = json[r][c];
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocab_size)
        return absl::InvalidArgumentError(absl::StrCat(path, ": sequence ", r, " position ", c,
                                                       " is not a token id below ", vocab_size));
      view[r][c] = id.get<int64_t>();
    }
  }
  return absl::OkStatus();
}

// A float32 array in NumPy's .npy format (version 1.0, C order), replaced whole: a link at `path`
// or its temporary is refused, never written through (base/replacing_file.h).
absl::Status WriteNpy(const std::string& path, const torch::Tensor& values) {
  std::string shape;
  for (const int64_t dim : values.sizes()) absl::StrAppend(&shape, dim, ", ");
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + shape + "), }";
  header.append(63 - (10 + header.size()) % 64, ' ');  // magic + lengths + header + '\n' = 64k
  header.push_back('\n');
  const auto length = static_cast<uint16_t>(header.size());
  const char magic[] = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0};
  const char bytes[] = {static_cast<char>(length & 0xFF), static_cast<char>(length >> 8)};
  SPHERET_ASSIGN_OR_RETURN(ReplacingFile out, ReplacingFile::Create(path));
  SPHERET_RETURN_IF_ERROR(out.Append(std::string_view(magic, sizeof(magic))));
  SPHERET_RETURN_IF_ERROR(out.Append(std::string_view(bytes, sizeof(bytes))));
  SPHERET_RETURN_IF_ERROR(out.Append(header));
  const torch::Tensor data = values.to(torch::kCPU, torch::kFloat).contiguous();
  SPHERET_RETURN_IF_ERROR(
      out.Append(std::string_view(static_cast<const char*>(data.data_ptr()), data.nbytes())));
  return out.Commit();
}

absl::Status Logits(const ExportCommands& commands) {
  TrainConfig config;
  SPHERET_RETURN_IF_ERROR(train::ReadRunConfig(commands.run, &config));
  nn::Gpt model{nullptr};
  int64_t step = 0;
  SPHERET_RETURN_IF_ERROR(train::LoadRunModel(commands.run, config, &model, &step));
  torch::Tensor ids;
  SPHERET_RETURN_IF_ERROR(ReadIds(commands.ids, config.vocab_size, &ids));
  if (ids.size(1) > config.block_size) {
    return absl::InvalidArgumentError(absl::StrCat(commands.ids, ": sequences of ", ids.size(1),
                                                   " ids, over block_size ", config.block_size));
  }
  torch::NoGradGuard no_grad;
  SPHERET_RETURN_IF_ERROR(WriteNpy(commands.out, model->forward(ids)));
  std::cerr << "spheret-lm: logits of " << ids.size(0) << " x " << ids.size(1) << " ids at step "
            << step << " written to " << commands.out << std::endl;
  return absl::OkStatus();
}

}  // namespace

void AddExportCommands(CLI::App& app, ExportCommands* commands) {
  CLI::App* exporter = app.add_subcommand(
      "export", "write a run's model for other tools: hf-gpt2 (transformers, lm-eval's hf)");
  commands->export_command = exporter;
  exporter->add_option("--run", commands->run, "training run folder (config.json, ckpt.pt)")
      ->required()
      ->check(CLI::ExistingDirectory);
  exporter->add_option("--format", commands->format, "hf-gpt2")
      ->check(CLI::IsMember({"hf-gpt2"}))
      ->capture_default_str();
  exporter->add_option("--out", commands->out, "output folder (created)")->required();
  CLI::App* logits = app.add_subcommand("logits", "write a run's logits for token ids (.npy)");
  commands->logits = logits;
  logits->add_option("--run", commands->run, "training run folder")
      ->required()
      ->check(CLI::ExistingDirectory);
  logits->add_option("--ids", commands->ids, "JSON file: [[id, ...], ...], equal lengths")
      ->required()
      ->check(CLI::ExistingFile);
  logits->add_option("--out", commands->out, ".npy file of float32 (B, T, vocab)")->required();
}

int RunExportCommand(ExportCommands& commands, train::EventWriter& events) {
  if (*commands.logits) {
    const absl::Status error = Logits(commands);
    return error.ok() ? 0 : Fail(events, error);
  }
  if (!*commands.export_command) return -1;
  train::HfExportReport report;
  if (absl::Status error = train::ExportHfGpt2(commands.run, commands.out, &report); !error.ok())
    return Fail(events, error);
  std::cerr << "spheret-lm: exported " << commands.run << " (step " << report.step << ", "
            << report.tensors << " tensors, " << report.parameters << " parameters) to "
            << commands.out << " as hf-gpt2"
            << (report.tokenizer ? " with the GPT-2 tokenizer"
                                 : " without a tokenizer (" + report.no_tokenizer + ")")
            << std::endl;
  return 0;
}

}  // namespace spheret::lm
