#include "worker/text/prepare_publish.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "worker/text/data_files.h"
#include "worker/text/dataset_identity.h"

namespace spheret::train {
namespace fs = std::filesystem;
namespace {

// fsync a file or folder by path (as worker/train/checkpoint.cc does).
absl::Status Sync(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0)
    return absl::InvalidArgumentError("cannot open " + path + ": " + std::strerror(errno));
  const bool ok = ::fsync(fd) == 0;
  const int error = errno;
  ::close(fd);
  if (!ok) return absl::InvalidArgumentError("cannot fsync " + path + ": " + std::strerror(error));
  return absl::OkStatus();
}

absl::Status Rename(const std::string& from, const std::string& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0) {
    return absl::InvalidArgumentError("cannot rename " + from + " to " + to + ": " +
                                      std::strerror(errno));
  }
  return absl::OkStatus();
}

// Every token of `path` read back: whole tokens, `tokens` of them, ids below vocab_size.
absl::Status CheckWritten(const std::string& path, int64_t tokens, int64_t vocab_size) {
  TokenFile file;
  SPHERET_RETURN_IF_ERROR(file.Open(path, vocab_size));
  if (file.size() != tokens) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " has ", file.size(), " tokens, not the ", tokens, " prepare wrote"));
  }
  return file.Check(tokens);
}

// Copies a tokenizer file into out_dir through a temporary.
absl::Status CopyTokenizerFile(const PreparedFiles& files, const std::string& name) {
  const std::string temp = TemporaryPath(files.out_dir, name);
  std::error_code ec;
  fs::copy_file(files.gpt2_dir + "/" + name, temp, fs::copy_options::overwrite_existing, ec);
  if (ec) {
    fs::remove(temp, ec);
    return absl::InvalidArgumentError("cannot copy " + name + " into " + files.out_dir + ": " +
                                      ec.message());
  }
  return Rename(temp, files.out_dir + "/" + name);
}

// The identity of the token files now in place (worker/text/dataset_identity.h).
absl::Status IdentityOf(const PreparedFiles& files, std::string* id) {
  TokenFile train, val;
  SPHERET_RETURN_IF_ERROR(train.Open(files.out_dir + "/train.bin", files.vocab_size));
  SPHERET_RETURN_IF_ERROR(val.Open(files.out_dir + "/val.bin", files.vocab_size));
  return ComputeDatasetId(train, val, files.vocab_size, files.tokenizer, id);
}

absl::Status WriteMeta(const PreparedFiles& files) {
  std::string id;
  SPHERET_RETURN_IF_ERROR(IdentityOf(files, &id));
  const nlohmann::json meta = {{"vocab_size", files.vocab_size},
                               {"tokenizer", files.tokenizer},
                               {"train_tokens", files.train_tokens},
                               {"val_tokens", files.val_tokens},
                               {"documents", files.documents},
                               {"parquet_nulls", files.parquet_nulls},
                               {"dataset_id", id}};
  const std::string path = files.out_dir + "/meta.json";
  const std::string temp = TemporaryPath(files.out_dir, "meta.json");
  std::ofstream out(temp, std::ios::trunc);
  out << meta.dump(2) << "\n";
  out.close();
  absl::Status status =
      out ? Sync(temp, false)
          : absl::InvalidArgumentError("cannot write " + temp + ": " + std::strerror(errno));
  if (status.ok()) status = Rename(temp, path);
  std::error_code ec;
  if (!status.ok()) fs::remove(temp, ec);
  return status;
}

}  // namespace

std::string TemporaryPath(const std::string& out_dir, const std::string& name) {
  return absl::StrCat(out_dir, "/.", name, ".tmp-", getpid());
}

absl::Status PublishDataset(const PreparedFiles& files) {
  // A split is read as windows of tokens and their next tokens: fewer than 2 cannot be trained on.
  for (const auto& [name, tokens] :
       {std::pair<const char*, int64_t>{"train", files.train_tokens}, {"val", files.val_tokens}}) {
    if (tokens < 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the corpus is too small: its ", name, " split has ", tokens,
          " token(s) and a split needs at least 2 (a token and the next one); give prepare more "
          "text, or change --val-fraction"));
    }
  }
  SPHERET_RETURN_IF_ERROR(CheckWritten(files.train_temp, files.train_tokens, files.vocab_size));
  SPHERET_RETURN_IF_ERROR(CheckWritten(files.val_temp, files.val_tokens, files.vocab_size));
  SPHERET_RETURN_IF_ERROR(Sync(files.train_temp, false));
  SPHERET_RETURN_IF_ERROR(Sync(files.val_temp, false));
  if (!files.gpt2_dir.empty()) {  // The data set carries its tokenizer, for `sample`.
    for (const char* name : {"encoder.json", "vocab.bpe"}) {
      SPHERET_RETURN_IF_ERROR(CopyTokenizerFile(files, name));
    }
  }
  // A trainer opening the folder between these renames finds counts that differ from meta.json's
  // and refuses them (data_files.h); one that opened it before keeps reading the old files.
  SPHERET_RETURN_IF_ERROR(Rename(files.train_temp, files.out_dir + "/train.bin"));
  SPHERET_RETURN_IF_ERROR(Rename(files.val_temp, files.out_dir + "/val.bin"));
  SPHERET_RETURN_IF_ERROR(WriteMeta(files));
  return Sync(files.out_dir, true);
}

}  // namespace spheret::train
