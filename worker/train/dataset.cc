#include "worker/train/dataset.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "base/status_macros.h"
#include "worker/train/bpe.h"
#include "worker/train/pickle.h"

namespace spheret::train {
namespace fs = std::filesystem;
namespace {

constexpr const char* kFortunesDir = "/usr/share/games/fortunes";

// Appends the regular files of `input` (a file, or a folder's files sorted by name) to `files`.
absl::Status ListInput(const std::string& input, std::vector<std::string>* files) {
  std::error_code ec;
  if (fs::is_regular_file(input, ec)) {
    files->push_back(input);
    return absl::OkStatus();
  }
  if (!fs::is_directory(input, ec))
    return absl::InvalidArgumentError("input " + input + " is neither a file nor a folder");
  std::vector<std::string> found;
  for (const auto& entry : fs::directory_iterator(input, ec)) {
    if (entry.is_regular_file() && !entry.is_symlink()) found.push_back(entry.path().string());
  }
  std::sort(found.begin(), found.end());
  files->insert(files->end(), found.begin(), found.end());
  if (ec) return absl::InvalidArgumentError("cannot list " + input + ": " + ec.message());
  return absl::OkStatus();
}

absl::Status WriteTokens(const std::string& path, const std::vector<uint16_t>& tokens) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(tokens.data()),
            static_cast<std::streamsize>(tokens.size() * sizeof(uint16_t)));
  out.close();
  if (!out) return absl::InvalidArgumentError("cannot write " + path + ": " + std::strerror(errno));
  return absl::OkStatus();
}

}  // namespace

absl::Status BuiltinCorpusFiles(const std::string& name, std::vector<std::string>* files) {
  if (name != "fortunes")
    return absl::InvalidArgumentError("unknown built-in corpus '" + name + "' (valid: fortunes)");
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(kFortunesDir, ec)) {
    const fs::path& path = entry.path();
    // The fortune text files have no extension; .dat are indexes and .u8 links to the same text.
    if (entry.is_regular_file() && !entry.is_symlink() && !path.has_extension()) {
      files->push_back(path.string());
    }
  }
  if (ec || files->empty()) {
    return absl::InvalidArgumentError(std::string("no fortune files in ") + kFortunesDir +
                                      " (install Debian's 'fortunes' package: make deps)");
  }
  std::sort(files->begin(), files->end());
  return absl::OkStatus();
}

namespace {

// The text of `file`, appended to *text.
absl::Status ReadText(const std::string& file, std::string* text) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return absl::InvalidArgumentError("cannot read " + file + ": " + std::strerror(errno));
  text->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return absl::OkStatus();
}

// Byte-level or GPT-2 BPE tokens of every file, with meta.json's content.
absl::Status Tokenize(const PrepareOptions& options, const std::vector<std::string>& files,
                      std::vector<uint16_t>* tokens, nlohmann::json* meta) {
  Gpt2Bpe bpe;
  const bool gpt2 = !options.gpt2_dir.empty();
  if (gpt2) {
    SPHERET_RETURN_IF_ERROR(
        bpe.Load(options.gpt2_dir + "/encoder.json", options.gpt2_dir + "/vocab.bpe"));
    if (bpe.vocab_size() > 65536)
      return absl::InvalidArgumentError("the GPT-2 vocabulary does not fit uint16 tokens");
  }
  std::string text;
  for (const std::string& file : files) {
    if (absl::Status error = ReadText(file, &text); !error.ok()) return error;
    if (!gpt2) {
      for (unsigned char byte : text) tokens->push_back(byte);
      continue;
    }
    for (int64_t id : bpe.Encode(text)) tokens->push_back(static_cast<uint16_t>(id));
    if (bpe.eot() >= 0) tokens->push_back(static_cast<uint16_t>(bpe.eot()));  // As nanoGPT.
  }
  *meta = gpt2 ? nlohmann::json{{"vocab_size", bpe.vocab_size()}, {"tokenizer", "gpt2"}}
               : nlohmann::json{{"vocab_size", 256}, {"tokenizer", "byte"}};
  return absl::OkStatus();
}

}  // namespace

absl::Status PrepareText(const PrepareOptions& options, PrepareStats* report) {
  if (!(options.val_fraction > 0 && options.val_fraction < 1)) {
    return absl::InvalidArgumentError("val_fraction must be in (0, 1)");
  }
  std::vector<std::string> files;
  for (const std::string& input : options.inputs) {
    if (absl::Status error = ListInput(input, &files); !error.ok()) return error;
  }
  if (files.empty()) return absl::InvalidArgumentError("no input files to prepare");
  std::vector<uint16_t> tokens;
  nlohmann::json meta;
  if (absl::Status error = Tokenize(options, files, &tokens, &meta); !error.ok()) return error;
  const auto split = static_cast<int64_t>(tokens.size() * (1.0 - options.val_fraction));
  std::error_code ec;
  fs::create_directories(options.out_dir, ec);
  if (ec)
    return absl::InvalidArgumentError("cannot create " + options.out_dir + ": " + ec.message());
  const std::vector<uint16_t> train(tokens.begin(), tokens.begin() + split);
  const std::vector<uint16_t> val(tokens.begin() + split, tokens.end());
  for (const auto& [name, part] : {std::pair{"train.bin", &train}, std::pair{"val.bin", &val}}) {
    if (absl::Status error = WriteTokens(options.out_dir + "/" + name, *part); !error.ok()) {
      return error;
    }
  }
  if (!options.gpt2_dir.empty()) {  // The data set carries its tokenizer, for `sample`.
    for (const char* name : {"encoder.json", "vocab.bpe"}) {
      fs::copy_file(options.gpt2_dir + "/" + name, options.out_dir + "/" + name,
                    fs::copy_options::overwrite_existing, ec);
      if (ec)
        return absl::InvalidArgumentError("cannot copy " + std::string(name) + " into " +
                                          options.out_dir + ": " + ec.message());
    }
  }
  std::ofstream meta_out(options.out_dir + "/meta.json", std::ios::trunc);
  meta_out << meta.dump(2) << "\n";
  if (!meta_out)
    return absl::InvalidArgumentError("cannot write " + options.out_dir + "/meta.json");
  report->files = static_cast<int64_t>(files.size());
  report->train_tokens = static_cast<int64_t>(train.size());
  report->val_tokens = static_cast<int64_t>(val.size());
  return absl::OkStatus();
}

namespace {

// spheret's meta.json: {"vocab_size": N, "tokenizer": "byte"}.
absl::Status ReadMetaJson(const std::string& path, DatasetMeta* meta) {
  std::ifstream in(path);
  try {
    const nlohmann::json json = nlohmann::json::parse(in);
    meta->vocab_size = json.at("vocab_size").get<int64_t>();
    meta->tokenizer = json.value("tokenizer", "");
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(path + ": " + e.what());
  }
  return absl::OkStatus();
}

// nanoGPT's meta.pkl: {'vocab_size': N, 'itos': {...}, 'stoi': {...}} (character-level sets).
absl::Status ReadMetaPickle(const std::string& path, DatasetMeta* meta) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  nlohmann::json value;
  SPHERET_RETURN_IF_ERROR(Annotate(path, ReadPickle(bytes, &value)));
  if (!value.is_object() || !value.contains("vocab_size") ||
      !value["vocab_size"].is_number_integer()) {
    return absl::InvalidArgumentError(path + ": no integer vocab_size");
  }
  meta->vocab_size = value["vocab_size"].get<int64_t>();
  meta->tokenizer = value.contains("itos") ? "char" : "";
  return absl::OkStatus();
}

}  // namespace

absl::Status ReadDatasetMeta(const std::string& dir, DatasetMeta* meta) {
  std::error_code ec;
  std::string path = dir + "/meta.json";
  absl::Status error;
  if (fs::exists(path, ec)) {
    error = ReadMetaJson(path, meta);
  } else if (path = dir + "/meta.pkl"; fs::exists(path, ec)) {
    error = ReadMetaPickle(path, meta);
  } else {
    *meta = DatasetMeta{50304, ""};  // nanoGPT's default: GPT-2 BPE padded to 64.
    return absl::OkStatus();
  }
  if (error.ok() && (meta->vocab_size < 1 || meta->vocab_size > 65536)) {
    error =
        absl::InvalidArgumentError(path + ": vocab_size must be in [1, 65536] for uint16 tokens");
  }
  return error;
}

TokenFile::TokenFile(TokenFile&& other) noexcept { *this = std::move(other); }

TokenFile& TokenFile::operator=(TokenFile&& other) noexcept {
  std::swap(data_, other.data_);
  std::swap(size_, other.size_);
  std::swap(mapped_bytes_, other.mapped_bytes_);
  return *this;
}

TokenFile::~TokenFile() { Close(); }

void TokenFile::Close() {
  if (data_ != nullptr) munmap(const_cast<uint16_t*>(data_), mapped_bytes_);
  data_ = nullptr;
  size_ = 0;
  mapped_bytes_ = 0;
}

absl::Status TokenFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return absl::InvalidArgumentError("cannot open " + path + ": " + std::strerror(errno));
  struct stat st {};
  absl::Status error;
  if (fstat(fd, &st) != 0) {
    error = absl::InvalidArgumentError("cannot stat " + path + ": " + std::strerror(errno));
  } else if (st.st_size < 4 || st.st_size % 2 != 0) {
    error = absl::InvalidArgumentError(path + " is not a uint16 token file (" +
                                       std::to_string(st.st_size) + " bytes)");
  } else {
    void* mapped = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    if (mapped == MAP_FAILED) {
      error = absl::InvalidArgumentError("cannot map " + path + ": " + std::strerror(errno));
    } else {
      Close();
      data_ = static_cast<const uint16_t*>(mapped);
      mapped_bytes_ = static_cast<size_t>(st.st_size);
      size_ = st.st_size / 2;
    }
  }
  ::close(fd);
  return error;
}

std::pair<torch::Tensor, torch::Tensor> SampleBatch(const TokenFile& tokens, int64_t batch,
                                                    int64_t block, torch::Generator& generator) {
  const torch::Tensor starts = torch::randint(tokens.size() - block, {batch}, generator);
  torch::Tensor x = torch::empty({batch, block}, torch::kLong);
  torch::Tensor y = torch::empty({batch, block}, torch::kLong);
  int64_t* xp = x.data_ptr<int64_t>();
  int64_t* yp = y.data_ptr<int64_t>();
  const int64_t* sp = starts.data_ptr<int64_t>();
  for (int64_t b = 0; b < batch; ++b) {
    const uint16_t* window = tokens.data() + sp[b];
    for (int64_t t = 0; t < block; ++t) {
      xp[b * block + t] = window[t];
      yp[b * block + t] = window[t + 1];
    }
  }
  return {x, y};
}

}  // namespace spheret::train
