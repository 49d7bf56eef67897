#include "worker/train/checkpoint.h"

#include <fcntl.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>
#include <sstream>
#include <string_view>

#include "base/status_macros.h"
#include "config/train_config.h"
#include "config/trial_config.h"
#include "protocol/trainer_events.h"

namespace spheret::train {
namespace {

// File layout: kMagic, then the payload's length and FNV-1a hash (little-endian uint64), then the
// payload (a LibTorch archive). The hash catches corruption the archive format would load silently.
// FNV-1a because the trainer links LibTorch and header-only libraries only (no absl), and c10's
// sha1 runs byte by byte, several times slower on multi-GB checkpoints.
constexpr char kMagic[8] = {'S', 'P', 'H', 'C', 'K', 'P', 'T', '1'};

uint64_t Fnv1a(std::string_view bytes) {
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char byte : bytes) hash = (hash ^ byte) * 1099511628211ull;
  return hash;
}

// The config keys that define the model; a checkpoint resumes only if they are unchanged.
// clang-format off
constexpr const char* kModelKeys[] = {
    "n_layer",    "n_head",     "n_embd",    "block_size",  "bias",       "method",
    "p",          "angle_max",  "decay",     "decay_index", "step_param", "radius_param",
    "inner_norm", "final_norm", "scalenorm", "vocab_size",  "loops",      "ngpt_alpha_init",
    "pos_encoding", "autonorm_mode", "inter_loop_norm", "connection_sha256"};
// clang-format on

std::string Errno(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

// fsync a file or folder by path.
absl::Status Sync(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) return absl::InternalError(Errno("cannot open", path));
  const bool ok = ::fsync(fd) == 0;
  ::close(fd);
  if (!ok) return absl::InternalError(Errno("cannot fsync", path));
  return absl::OkStatus();
}

// The archive inside a checkpoint file, once its magic, length and checksum hold.
absl::StatusOr<std::string_view> Payload(const std::string& file, const std::string& bad) {
  uint64_t header[2];
  constexpr size_t kHeader = sizeof(kMagic) + sizeof(header);
  if (file.size() < kHeader || file.compare(0, sizeof(kMagic), kMagic, sizeof(kMagic)) != 0) {
    return absl::DataLossError(bad + "not a spheret checkpoint (format " +
                               std::string(kMagic, sizeof(kMagic)) + ")");
  }
  std::memcpy(header, file.data() + sizeof(kMagic), sizeof(header));
  const std::string_view bytes(file.data() + kHeader, file.size() - kHeader);
  if (bytes.size() != header[0]) {
    return absl::DataLossError(bad + "truncated (" + std::to_string(bytes.size()) + " of " +
                               std::to_string(header[0]) + " bytes)");
  }
  if (Fnv1a(bytes) != header[1])
    return absl::DataLossError(bad + "checksum mismatch (the file is corrupt)");
  return bytes;
}

// Copies the model's tensors (parameters and buffers) out of `archive`, each checked by name
// and shape.
absl::Status ReadModel(torch::serialize::InputArchive& archive, torch::nn::Module& model,
                       const std::string& bad) {
  torch::NoGradGuard no_grad;
  auto read = [&](const std::string& key, torch::Tensor& tensor) -> absl::Status {
    torch::Tensor saved;
    if (!archive.try_read(key, saved)) return absl::DataLossError(bad + "no tensor " + key);
    if (!saved.sizes().equals(tensor.sizes())) {
      return absl::DataLossError(bad + key + " has shape " + c10::str(saved.sizes()) +
                                 ", the model " + c10::str(tensor.sizes()));
    }
    tensor.copy_(saved);
    return absl::OkStatus();
  };
  for (auto& item : model.named_parameters())
    SPHERET_RETURN_IF_ERROR(read(item.key(), item.value()));
  for (auto& item : model.named_buffers()) SPHERET_RETURN_IF_ERROR(read(item.key(), item.value()));
  return absl::OkStatus();
}

}  // namespace

double TrainState::LossAverage() const {
  if (loss_window.empty()) return 0;
  return std::accumulate(loss_window.begin(), loss_window.end(), 0.0) /
         static_cast<double>(loss_window.size());
}

std::string CheckpointPath(const std::string& out_dir) {
  return out_dir + "/" + protocol::kCheckpointFile;
}

absl::Status SaveCheckpoint(const std::string& path, const torch::nn::Module& model,
                            const torch::optim::Optimizer& optimizer, const TrainState& state) {
  std::ostringstream payload;
  try {
    torch::serialize::OutputArchive archive, model_archive, optimizer_archive;
    for (const auto& item : model.named_parameters()) model_archive.write(item.key(), item.value());
    for (const auto& item : model.named_buffers())
      model_archive.write(item.key(), item.value(), true);
    optimizer.save(optimizer_archive);
    archive.write("model", model_archive);
    archive.write("optimizer", optimizer_archive);
    archive.write("step", c10::IValue(state.step));
    archive.write("loss_window", torch::tensor(state.loss_window, torch::kDouble));
    archive.write("val_loss", c10::IValue(state.val_loss));
    archive.write("loss_spikes", c10::IValue(state.loss_spikes));
    archive.write("data_rng", state.data_rng);
    archive.write("torch_rng", state.torch_rng);
    archive.write("config", c10::IValue(state.config.dump()));
    archive.write("dataset_id", c10::IValue(state.dataset.id));
    archive.write("dataset_dir", c10::IValue(state.dataset.dir));
    archive.save_to(payload);
  } catch (const std::exception& e) {
    return absl::InternalError("cannot serialize checkpoint " + path + ": " + e.what());
  }
  const std::string bytes = payload.str();
  const std::string temp = path + ".tmp";
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    const uint64_t header[2] = {bytes.size(), Fnv1a(bytes)};
    out.write(kMagic, sizeof(kMagic));
    out.write(reinterpret_cast<const char*>(header), sizeof(header));
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out.flush()) return absl::InternalError(Errno("cannot write", temp));
  }
  if (absl::Status error = Sync(temp, false); !error.ok()) return error;
  if (std::rename(temp.c_str(), path.c_str()) != 0)
    return absl::InternalError(Errno("cannot rename to", path));
  const std::string folder = std::filesystem::path(path).parent_path().string();
  return Sync(folder.empty() ? "." : folder, true);
}

absl::Status LoadCheckpoint(const std::string& path, const nlohmann::json& config,
                            torch::nn::Module& model, torch::optim::Optimizer* optimizer,
                            TrainState* state) {
  const std::string bad = "checkpoint " + path + " is not usable: ";
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::DataLossError(Errno("cannot open checkpoint", path));
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  absl::StatusOr<std::string_view> payload = Payload(file, bad);
  if (!payload.ok()) return payload.status();
  const std::string_view bytes = *payload;
  try {
    torch::serialize::InputArchive archive, model_archive, optimizer_archive;
    // Tensors land on the model's device, whatever device wrote them.
    const auto parameters = model.parameters();
    const torch::Device device = parameters.empty() ? torch::kCPU : parameters.front().device();
    archive.load_from(bytes.data(), bytes.size(), device);
    c10::IValue value;
    archive.read("config", value);
    const TrialConfig saved(value.toStringRef());  // the run's config, as written by SaveCheckpoint
    if (!saved.is_object()) return absl::DataLossError(bad + "its config is not a JSON object");
    state->config = saved.object();
    SPHERET_RETURN_IF_ERROR(
        Annotate("cannot resume from " + path, CheckResumable(state->config, config)));
    archive.read("model", model_archive);
    SPHERET_RETURN_IF_ERROR(ReadModel(model_archive, model, bad));
    if (optimizer != nullptr) {
      archive.read("optimizer", optimizer_archive);
      optimizer->load(optimizer_archive);
    }
    archive.read("step", value);
    state->step = value.toInt();
    torch::Tensor window;
    archive.read("loss_window", window);
    state->loss_window.assign(window.data_ptr<double>(),
                              window.data_ptr<double>() + window.numel());
    archive.read("val_loss", value);
    state->val_loss = value.toDouble();
    // Checkpoints written before spike counting have none: counting starts again from 0.
    state->loss_spikes = archive.try_read("loss_spikes", value) ? value.toInt() : 0;
    // Checkpoints written before data set identities have none: Checkpointer::Resume warns.
    state->dataset.id = archive.try_read("dataset_id", value) ? value.toStringRef() : "";
    state->dataset.dir = archive.try_read("dataset_dir", value) ? value.toStringRef() : "";
    archive.read("data_rng", state->data_rng);
    archive.read("torch_rng", state->torch_rng);
  } catch (const std::exception& e) {  // c10::Error from a foreign archive, json errors.
    std::string what = e.what();
    return absl::DataLossError(bad + what.substr(0, what.find('\n')));
  }
  return absl::OkStatus();
}

absl::Status CheckResumable(const nlohmann::json& saved, const nlohmann::json& current) {
  // A key newer than the checkpoint (loops, ngpt_alpha_init, pos_encoding) had its default value
  // then.
  const nlohmann::json defaults = ConfigToJson(TrainConfig{});
  for (const char* key : kModelKeys) {
    const nlohmann::json a = saved.value(key, defaults.value(key, nlohmann::json())),
                         b = current.value(key, nlohmann::json());
    if (a != b && std::string_view(key) == "connection_sha256") {
      return absl::FailedPreconditionError(
          "the checkpoint was trained with the connection file of SHA-256 " + a.get<std::string>() +
          ", and the connection file " + current.value("connection", "") + " now has SHA-256 " +
          b.get<std::string>() + " (a changed connection is a new trial: train it from the start)");
    }
    if (a != b) {
      return absl::FailedPreconditionError(std::string("the checkpoint was written with ") + key +
                                           " = " + a.dump() + ", the config says " + b.dump());
    }
  }
  return absl::OkStatus();
}

}  // namespace spheret::train
