// The identity of a token data set (issue 44, item 9): which tokens a run trained on. A run's
// checkpoint records it (worker/train/checkpoint.h), and a resume on a data set of another
// identity (rebuilt or changed since) is refused, naming both. `spheret-lm prepare` stores it in
// meta.json ("dataset_id"); the trainer computes it again from the token files it opened (a few
// MiB read), so a folder changed by other means than prepare is known too.
//
// The identity is "ds1:" and 32 hex digits of a SHA-256 over the vocabulary size, the tokenizer
// and, for train.bin and val.bin, the token count and up to kIdentityChunks chunks of
// kIdentityChunkTokens evenly spaced from the first token to the last (a file of up to 2 MiB
// whole). A rebuild that keeps every count and changes only tokens between the chunks keeps
// the identity: the sample is a check against a different data set, not a checksum.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "worker/text/data_files.h"

namespace spheret::train {

inline constexpr int64_t kIdentityChunks = 64;
inline constexpr int64_t kIdentityChunkTokens = 16 << 10;  // 32 KiB

// Which data set a run read: its identity and the folder it was read from.
struct DatasetIdentity {
  std::string id;   // "" when unknown (a checkpoint written before identities were recorded)
  std::string dir;  // the data set's folder as the run resolved it
};

// The identity of the data set of `train` and `val` (open token files) whose meta says
// `vocab_size` and `tokenizer`. InvalidArgument naming the file when a read fails.
absl::Status ComputeDatasetId(const TokenFile& train, const TokenFile& val, int64_t vocab_size,
                              const std::string& tokenizer, std::string* id);

// OK when a run that trained on `saved` may go on with `current`: the same identity (the folder
// may differ: a copy holds the same tokens). A saved identity "" is accepted, *warning (may be
// null) saying that the data set could not be checked; else FailedPrecondition naming both
// identities and folders.
absl::Status CheckSameDataset(const DatasetIdentity& saved, const DatasetIdentity& current,
                              std::string* warning);

}  // namespace spheret::train
