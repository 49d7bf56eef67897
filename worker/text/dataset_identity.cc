#include "worker/text/dataset_identity.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/sha256.h"
#include "base/status_macros.h"

namespace spheret::train {
namespace {

// A file's count and its sampled chunks, appended to `digest_input`.
absl::Status AppendSample(const TokenFile& file, const char* name, std::string* digest_input) {
  const int64_t size = file.size();
  absl::StrAppend(digest_input, name, " tokens=", size, "\n");
  const bool whole = size <= kIdentityChunks * kIdentityChunkTokens;
  const int64_t chunks =
      whole ? (size + kIdentityChunkTokens - 1) / kIdentityChunkTokens : kIdentityChunks;
  std::vector<uint16_t> buffer(static_cast<size_t>(kIdentityChunkTokens));
  for (int64_t i = 0; i < chunks; ++i) {
    // Chunk i starts i / (chunks - 1) of the way to the last whole chunk (whole: back to back).
    const int64_t first = whole ? i * kIdentityChunkTokens
                                : i * (size - kIdentityChunkTokens) / (kIdentityChunks - 1);
    const int64_t count = std::min(kIdentityChunkTokens, size - first);
    SPHERET_RETURN_IF_ERROR(file.Read(first, count, buffer.data()));
    digest_input->append(reinterpret_cast<const char*>(buffer.data()),
                         static_cast<size_t>(count) * sizeof(uint16_t));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ComputeDatasetId(const TokenFile& train, const TokenFile& val, int64_t vocab_size,
                              const std::string& tokenizer, std::string* id) {
  std::string digest_input =
      absl::StrCat("spheret data set 1\nvocab_size=", vocab_size, "\ntokenizer=", tokenizer, "\n");
  SPHERET_RETURN_IF_ERROR(AppendSample(train, "train.bin", &digest_input));
  SPHERET_RETURN_IF_ERROR(AppendSample(val, "val.bin", &digest_input));
  *id = "ds1:" + Sha256Hex(digest_input).substr(0, 32);
  return absl::OkStatus();
}

absl::Status CheckSameDataset(const DatasetIdentity& saved, const DatasetIdentity& current,
                              std::string* warning) {
  if (saved.id.empty()) {
    if (warning != nullptr) {
      *warning = absl::StrCat(
          "the checkpoint records no data set identity (written before spheret recorded one): "
          "resuming on ",
          current.dir, " (", current.id, ") without knowing whether the run trained on it");
    }
    return absl::OkStatus();
  }
  if (saved.id == current.id) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "the run trained on data set ", saved.id, " (", saved.dir, "), but ", current.dir,
      " is data set ", current.id,
      ": it was rebuilt or changed since. Resume on the data the run trained on, or train again "
      "in another run folder"));
}

}  // namespace spheret::train
