#include "worker/train/hf_gpt2.h"

#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/replacing_file.h"
#include "base/status_macros.h"
#include "worker/train/run_folder.h"
#include "worker/train/safetensors.h"
#include "worker/train/trainer.h"

namespace spheret::train {
namespace fs = std::filesystem;
namespace {

// Copies `from` to `to` through a ReplacingFile: a link planted at `to` or its temporary is
// refused.
absl::Status CopyFile(const std::string& from, const std::string& to) {
  std::ifstream in(from, std::ios::binary);
  if (!in) return absl::InternalError("cannot read " + from);
  SPHERET_ASSIGN_OR_RETURN(ReplacingFile out, ReplacingFile::Create(to));
  std::vector<char> buffer(1 << 16);
  while (in.read(buffer.data(), static_cast<std::streamsize>(buffer.size())) || in.gcount() > 0) {
    SPHERET_RETURN_IF_ERROR(out.Append(std::string_view(buffer.data(), in.gcount())));
  }
  if (in.bad()) return absl::InternalError("cannot read " + from);
  return out.Commit();
}

absl::Status WriteJson(const std::string& path, const nlohmann::ordered_json& json) {
  SPHERET_ASSIGN_OR_RETURN(ReplacingFile out, ReplacingFile::Create(path));
  SPHERET_RETURN_IF_ERROR(out.Append(json.dump(2) + "\n"));
  return out.Commit();
}

// GPT-2's config.json for `config`'s shape; `eot` is the end-of-text id (bos and eos).
nlohmann::ordered_json Gpt2ConfigJson(const TrainConfig& config, int64_t eot, int64_t step) {
  nlohmann::ordered_json json = {{"architectures", {"GPT2LMHeadModel"}},
                                 {"model_type", "gpt2"},
                                 {"vocab_size", config.vocab_size},
                                 {"n_positions", config.block_size},
                                 {"n_ctx", config.block_size},
                                 {"n_embd", config.n_embd},
                                 {"n_layer", config.n_layer},
                                 {"n_head", config.n_head},
                                 {"n_inner", nullptr},
                                 {"activation_function", "gelu"},
                                 {"resid_pdrop", config.dropout},
                                 {"embd_pdrop", config.dropout},
                                 {"attn_pdrop", config.dropout},
                                 {"layer_norm_epsilon", 1e-5},
                                 {"initializer_range", 0.02},
                                 {"scale_attn_weights", true},
                                 {"use_cache", true},
                                 {"bos_token_id", eot},
                                 {"eos_token_id", eot},
                                 {"tie_word_embeddings", true},
                                 {"dtype", "float32"}};
  json["spheret"] = {{"method", std::string(MethodId(Method::kPreLn))},
                     {"step", step},
                     {"dataset", config.dataset}};
  return json;
}

// vocab.json and merges.txt (GPT-2's encoder.json and vocab.bpe) and the tokenizer's settings.
absl::Status WriteGpt2Tokenizer(const TrainConfig& config, const std::string& out_dir) {
  const std::string data = ResolveDatasetDir(config);
  SPHERET_RETURN_IF_ERROR(CopyFile(data + "/encoder.json", out_dir + "/vocab.json"));
  SPHERET_RETURN_IF_ERROR(CopyFile(data + "/vocab.bpe", out_dir + "/merges.txt"));
  const nlohmann::ordered_json settings = {{"tokenizer_class", "GPT2Tokenizer"},
                                           {"model_max_length", config.block_size},
                                           {"bos_token", "<|endoftext|>"},
                                           {"eos_token", "<|endoftext|>"},
                                           {"unk_token", "<|endoftext|>"},
                                           {"add_prefix_space", false},
                                           {"add_bos_token", false}};
  SPHERET_RETURN_IF_ERROR(WriteJson(out_dir + "/tokenizer_config.json", settings));
  return WriteJson(out_dir + "/special_tokens_map.json", {{"bos_token", "<|endoftext|>"},
                                                          {"eos_token", "<|endoftext|>"},
                                                          {"unk_token", "<|endoftext|>"}});
}

absl::Status Refuse(const std::string& why) {
  return absl::FailedPreconditionError("GPT-2 cannot hold this model: " + why);
}

}  // namespace

std::vector<Gpt2Name> Gpt2Names(int64_t n_layer, bool norms) {
  std::vector<Gpt2Name> names = {{"wte.weight", "transformer.wte.weight"},
                                 {"wpe.weight", "transformer.wpe.weight"}};
  for (int64_t l = 0; l < n_layer; ++l) {
    const std::string ours = absl::StrCat("blocks.", l, ".");
    const std::string hf = absl::StrCat("transformer.h.", l, ".");
    for (const char* part : {"weight", "bias"}) {
      const bool w = std::string(part) == "weight";
      if (norms) names.push_back({ours + "conn_attn.norm." + part, hf + "ln_1." + part});
      names.push_back({ours + "attn.c_attn." + part, hf + "attn.c_attn." + part, w});
      names.push_back({ours + "attn.c_proj." + part, hf + "attn.c_proj." + part, w});
      if (norms) names.push_back({ours + "conn_mlp.norm." + part, hf + "ln_2." + part});
      names.push_back({ours + "mlp.c_fc." + part, hf + "mlp.c_fc." + part, w});
      names.push_back({ours + "mlp.c_proj." + part, hf + "mlp.c_proj." + part, w});
    }
  }
  names.push_back({"ln_f.weight", "transformer.ln_f.weight"});
  names.push_back({"ln_f.bias", "transformer.ln_f.bias"});
  return names;
}

absl::Status CheckGpt2Architecture(const TrainConfig& config) {
  const ConnectionOptions& c = config.connection;
  if (c.method != Method::kPreLn) {
    return Refuse(absl::StrCat("its method is ", std::string(MethodId(c.method)),
                               "; GPT-2's blocks are pre_ln (x + F(LayerNorm(x)))"));
  }
  if (!config.bias) return Refuse("it has no biases (bias: false); GPT-2's layers have biases");
  if (config.pos_encoding != PosEncoding::kLearned)
    return Refuse("it rotates q and k (pos_encoding: rope); GPT-2 learns positions (wpe)");
  if (config.loops != 1) return Refuse("it is looped (loops > 1); GPT-2 runs its blocks once");
  if (c.final_norm != NormKind::kLayerNorm)
    return Refuse("its final norm is not a LayerNorm; GPT-2's ln_f is one");
  return absl::OkStatus();
}

namespace {

// An export writes config.json and model.safetensors: never over a run (its config.json is the
// run's) or over a folder of another model.
absl::Status CheckExportDir(const std::string& run_dir, const std::string& out_dir) {
  std::error_code ec;
  if (fs::exists(out_dir + "/ckpt.pt", ec) || fs::equivalent(run_dir, out_dir, ec)) {
    return absl::InvalidArgumentError(
        "--out " + out_dir + " holds a training run (ckpt.pt): export into a folder of its own");
  }
  std::ifstream in(out_dir + "/config.json");
  if (!in) return absl::OkStatus();
  const nlohmann::json json = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  const auto type = json.is_object() ? json.find("model_type") : json.end();
  if (json.is_object() && type != json.end() && *type == "gpt2") return absl::OkStatus();
  return absl::InvalidArgumentError("--out " + out_dir +
                                    " holds a config.json that is not a GPT-2 model's: export "
                                    "into a folder of its own or an earlier export's");
}

// Loads the run's tokenizer when it is GPT-2 BPE; else says why the export has none.
bool ExportTokenizer(const TrainConfig& config, Codec* codec, std::string* why_not) {
  const absl::Status loaded = LoadCodec(config, codec);
  if (loaded.ok() && codec->gpt2) return true;
  *why_not = loaded.ok()
                 ? "its data set is byte-level, not GPT-2 BPE"
                 : "its data set's tokenizer cannot be read here: " + std::string(loaded.message());
  return false;
}

}  // namespace

absl::Status ExportHfGpt2(const std::string& run_dir, const std::string& out_dir,
                          HfExportReport* report) {
  TrainConfig config;
  SPHERET_RETURN_IF_ERROR(ReadRunConfig(run_dir, &config));
  SPHERET_RETURN_IF_ERROR(CheckGpt2Architecture(config));
  SPHERET_RETURN_IF_ERROR(CheckExportDir(run_dir, out_dir));
  Codec codec;
  report->tokenizer = ExportTokenizer(config, &codec, &report->no_tokenizer);
  nn::Gpt model{nullptr};
  SPHERET_RETURN_IF_ERROR(LoadRunModel(run_dir, config, &model, &report->step));
  std::map<std::string, torch::Tensor> ours;
  for (const auto& item : model->named_parameters()) ours[item.key()] = item.value();
  std::vector<torch::Tensor> held;
  std::vector<TensorBytes> tensors;
  for (const Gpt2Name& pair : Gpt2Names(config.n_layer, /*norms=*/true)) {
    const auto found = ours.find(pair.ours);
    if (found == ours.end()) return Refuse("it has no parameter " + pair.ours);
    torch::Tensor t = found->second.detach().to(torch::kCPU, torch::kFloat);
    held.push_back((pair.transpose ? t.t() : t).contiguous());
    tensors.push_back({pair.hf, "F32", held.back().sizes().vec(), held.back().data_ptr(),
                       static_cast<int64_t>(held.back().nbytes())});
    report->parameters += held.back().numel();
    ours.erase(found);
  }
  if (!ours.empty()) return Refuse("its parameter " + ours.begin()->first + " has no GPT-2 place");
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) return absl::InternalError("cannot create " + out_dir + ": " + ec.message());
  SPHERET_RETURN_IF_ERROR(
      WriteSafetensors(out_dir + "/model.safetensors", tensors, {{"format", "pt"}}));
  report->tensors = static_cast<int64_t>(tensors.size());
  const int64_t eot = report->tokenizer ? codec.PrefixToken() : 0;
  SPHERET_RETURN_IF_ERROR(
      WriteJson(out_dir + "/config.json", Gpt2ConfigJson(config, eot, report->step)));
  if (report->tokenizer) return WriteGpt2Tokenizer(config, out_dir);
  for (const char* stale :
       {"vocab.json", "merges.txt", "tokenizer_config.json", "special_tokens_map.json"}) {
    fs::remove(out_dir + "/" + stale, ec);  // an earlier export's tokenizer is not this model's
  }
  return absl::OkStatus();
}

}  // namespace spheret::train
