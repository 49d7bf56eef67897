// `init_from: hf-gpt2:DIR`: a run starts from a Hugging Face GPT-2 folder (its config.json's shape
// and model.safetensors' weights), as nanoGPT's init_from='gpt2' does from the hub.
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/path_under_root.h"
#include "base/status_macros.h"
#include "worker/train/hf_gpt2.h"
#include "worker/train/safetensors.h"

namespace spheret::train {
namespace {

// A tensor of the file as float32 in spheret's layout (transposed back for Conv1D weights).
absl::Status ReadTensor(const SafetensorsFile& file, const std::string& name, bool transpose,
                        torch::Tensor* out) {
  const SafetensorsFile::Entry& entry = file.entries().at(name);
  static const std::map<std::string, torch::Dtype> kTypes = {{"F32", torch::kFloat},
                                                             {"F16", torch::kHalf},
                                                             {"BF16", torch::kBFloat16},
                                                             {"F64", torch::kDouble}};
  const auto type = kTypes.find(entry.dtype);
  if (type == kTypes.end()) {
    return absl::InvalidArgumentError(absl::StrCat(file.path(), ": tensor ", name, " is ",
                                                   entry.dtype, "; a float tensor was expected"));
  }
  torch::Tensor raw = torch::empty(entry.shape, torch::TensorOptions().dtype(type->second));
  SPHERET_RETURN_IF_ERROR(file.Read(name, raw.data_ptr()));
  raw = raw.to(torch::kFloat);
  *out = transpose && raw.dim() == 2 ? raw.t().contiguous() : raw;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> ResolveInitFromDir(const TrainConfig& config) {
  return ResolveUnderRoot("config key 'init_from' (" + config.init_from + "):",
                          config.init_from.substr(std::string(kHfGpt2Prefix).size()), "--data-root",
                          config.data_root);
}

namespace {

// Settings of transformers' GPT2Config that change the function GPT-2 computes: only spheret's
// (and their defaults) are taken; gelu_new, GPT-2's own tanh GELU, loads as the exact GELU
// (docs/methods.md §0).
absl::Status CheckGpt2Function(const std::string& path, const nlohmann::json& json) {
  const auto is = [&](const char* key, const nlohmann::json& fallback,
                      const std::vector<nlohmann::json>& allowed) {
    const nlohmann::json value = json.contains(key) ? json[key] : fallback;
    return std::find(allowed.begin(), allowed.end(), value) != allowed.end();
  };
  const auto refuse = [&](const std::string& what) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", what, "; spheret's pre_ln GPT cannot compute that model"));
  };
  if (!is("activation_function", "gelu_new", {"gelu", "gelu_new"}))
    return refuse("activation_function must be \"gelu\" or \"gelu_new\"");
  const nlohmann::json eps =
      json.contains("layer_norm_epsilon") ? json["layer_norm_epsilon"] : nlohmann::json(1e-5);
  if (!eps.is_number() || std::abs(eps.get<double>() - 1e-5) > 1e-12)
    return refuse("layer_norm_epsilon must be 1e-5");
  if (!is("scale_attn_weights", true, {true})) return refuse("scale_attn_weights must be true");
  if (!is("scale_attn_by_inverse_layer_idx", false, {false}))
    return refuse("scale_attn_by_inverse_layer_idx must be false");
  return absl::OkStatus();
}

}  // namespace

absl::Status ReadHfGpt2Shape(const std::string& dir, HfGpt2Shape* shape) {
  const std::string path = dir + "/config.json";
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError("init_from: cannot read " + path);
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not valid JSON (at byte ", e.byte, ")"));
  }
  if (!json.is_object() || !json.contains("model_type") || json["model_type"] != "gpt2")
    return absl::InvalidArgumentError(path + ": not a GPT-2 config (model_type is not \"gpt2\")");
  const std::pair<const char*, int64_t*> keys[] = {{"vocab_size", &shape->vocab_size},
                                                   {"n_positions", &shape->n_positions},
                                                   {"n_embd", &shape->n_embd},
                                                   {"n_layer", &shape->n_layer},
                                                   {"n_head", &shape->n_head}};
  for (const auto& [key, value] : keys) {
    const auto found = json.find(key);
    if (found == json.end() || !found->is_number_integer() || found->get<int64_t>() < 1)
      return absl::InvalidArgumentError(path + ": '" + key + "' must be a positive integer");
    *value = found->get<int64_t>();
  }
  if (json.contains("n_inner") && !json["n_inner"].is_null() &&
      json["n_inner"] != 4 * shape->n_embd) {
    return absl::InvalidArgumentError(path + ": n_inner must be 4 * n_embd (nanoGPT's MLP)");
  }
  return CheckGpt2Function(path, json);
}

absl::Status ApplyInitFromShape(TrainConfig* config) {
  if (config->init_from.empty()) return absl::OkStatus();
  HfGpt2Shape shape;
  SPHERET_ASSIGN_OR_RETURN(const std::string dir, ResolveInitFromDir(*config));
  SPHERET_RETURN_IF_ERROR(ReadHfGpt2Shape(dir, &shape));
  const std::pair<const char*, std::pair<int64_t*, int64_t>> keys[] = {
      {"n_layer", {&config->n_layer, shape.n_layer}},
      {"n_head", {&config->n_head, shape.n_head}},
      {"n_embd", {&config->n_embd, shape.n_embd}},
      {"vocab_size", {&config->vocab_size, shape.vocab_size}},
      {"block_size", {&config->block_size, shape.n_positions}}};
  for (const auto& [key, value] : keys) {
    const bool given = config->explicit_keys.count(key) > 0;
    const bool crop = std::string(key) == "block_size" && *value.first <= value.second;
    if (given && *value.first != value.second && !crop) {
      return absl::InvalidArgumentError(absl::StrCat(
          "config key '", key, "' is ", *value.first, " but init_from ", config->init_from, " has ",
          value.second, std::string(key) == "block_size" ? " (it may only be smaller)" : ""));
    }
    if (!given) *value.first = value.second;
    config->explicit_keys.insert(key);
  }
  return FinalizeConfig(config);
}

namespace {

// The file's tensors by their "transformer."-prefixed name (GPT-2's attention masks left out),
// each mapped to the file's own name.
std::map<std::string, std::string> HfTensorNames(const SafetensorsFile& file) {
  std::map<std::string, std::string> hf;
  for (const auto& [name, entry] : file.entries()) {
    if (absl::EndsWith(name, ".attn.bias") || absl::EndsWith(name, ".attn.masked_bias")) continue;
    hf[absl::StartsWith(name, "transformer.") || name == "lm_head.weight" ? name
                                                                          : "transformer." + name] =
        name;
  }
  return hf;
}

// Copies the file's tensor `source` (its name in the file) into `target`, the model's
// parameter `pair.ours`; wpe is cropped to the model's block_size.
absl::Status CopyHfTensor(const SafetensorsFile& file, const std::string& source,
                          const Gpt2Name& pair, torch::Tensor& target) {
  torch::Tensor value;
  SPHERET_RETURN_IF_ERROR(ReadTensor(file, source, pair.transpose, &value));
  if (pair.ours == "wpe.weight" && value.size(0) > target.size(0))
    value = value.narrow(0, 0, target.size(0));  // crop_block_size
  if (!value.sizes().equals(target.sizes())) {
    return absl::InvalidArgumentError(absl::StrCat(file.path(), ": ", source, " has shape ",
                                                   torch::str(value.sizes()), ", the model's ",
                                                   pair.ours, " ", torch::str(target.sizes())));
  }
  target.copy_(value);
  return absl::OkStatus();
}

// An lm_head.weight in the file must be wte's: spheret's GPT ties them.
absl::Status CheckTiedHead(const SafetensorsFile& file, const std::string& head,
                           const torch::Tensor& wte) {
  torch::Tensor value;
  SPHERET_RETURN_IF_ERROR(ReadTensor(file, head, false, &value));
  if (!torch::equal(value, wte.detach().to(torch::kCPU)))
    return absl::InvalidArgumentError(file.path() +
                                      ": lm_head.weight is not wte.weight: an "
                                      "untied head, which spheret's GPT ties");
  return absl::OkStatus();
}

}  // namespace

absl::Status LoadHfGpt2Weights(const std::string& dir, const TrainConfig& config,
                               nn::GptImpl& model, std::ostream& log) {
  SafetensorsFile file;
  SPHERET_RETURN_IF_ERROR(file.Open(dir + "/model.safetensors"));
  std::map<std::string, std::string> hf = HfTensorNames(file);
  std::map<std::string, torch::Tensor> ours;
  for (const auto& item : model.named_parameters()) ours[item.key()] = item.value();
  const bool pre_ln = config.connection.method == Method::kPreLn;
  const bool ln_f = config.connection.final_norm == NormKind::kLayerNorm &&
                    config.connection.method != Method::kPreDyt;
  torch::NoGradGuard no_grad;
  int64_t loaded = 0;
  for (const Gpt2Name& pair : Gpt2Names(config.n_layer, pre_ln)) {
    if (!ln_f && absl::StartsWith(pair.ours, "ln_f.")) continue;
    const auto source = hf.find(pair.hf);
    const auto target = ours.find(pair.ours);
    if (source == hf.end()) return absl::InvalidArgumentError(file.path() + " has no " + pair.hf);
    if (target == ours.end()) continue;  // a parameter this model does not have (no biases)
    SPHERET_RETURN_IF_ERROR(CopyHfTensor(file, source->second, pair, target->second));
    hf.erase(source);
    ours.erase(target);
    ++loaded;
  }
  if (const auto head = hf.find("lm_head.weight"); head != hf.end()) {
    SPHERET_RETURN_IF_ERROR(CheckTiedHead(file, head->second, model.wte->weight));
    hf.erase(head);
  }
  std::vector<std::string> defaults, unused;
  for (const auto& item : ours) defaults.push_back(item.first);
  for (const auto& item : hf) unused.push_back(item.second);
  log << "spheret-lm: init_from " << config.init_from << ": " << loaded << " tensors loaded"
      << (defaults.empty() ? "" : "; at their defaults: " + absl::StrJoin(defaults, ", "))
      << (unused.empty() ? "" : "; not used: " + absl::StrJoin(unused, ", ")) << std::endl;
  return absl::OkStatus();
}

}  // namespace spheret::train
