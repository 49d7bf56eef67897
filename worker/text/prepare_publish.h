// The last step of `spheret-lm prepare` (internal to spheret_train): the token files it wrote as
// temporaries in the output folder become the data set. Until then the folder's old data set is
// untouched, so a prepare that fails (bad input, full disk) leaves the old one whole.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace spheret::train {

// What prepare wrote: temporaries in out_dir, the counts and the tokenizer.
struct PreparedFiles {
  std::string out_dir;
  std::string train_temp, val_temp;  // TemporaryPath(out_dir, "train.bin"), ... "val.bin"
  int64_t train_tokens = 0, val_tokens = 0;
  int64_t vocab_size = 256;
  std::string tokenizer = "byte";  // or "gpt2"
  std::string gpt2_dir;            // "gpt2": encoder.json and vocab.bpe are copied from here
  int64_t documents = 0;           // documents read
  int64_t parquet_nulls = 0;       // null Parquet values skipped (no documents)
};

// <out_dir>/.<name>.tmp-<pid>: this process's temporary for out_dir/name.
std::string TemporaryPath(const std::string& out_dir, const std::string& name);

// Checks every token of the temporaries (whole uint16 tokens, ids below vocab_size, counts as
// stated), makes them durable, and renames them over train.bin and val.bin; then the tokenizer
// files; meta.json (with the counts, the documents, the Parquet nulls skipped and the data set's
// identity, worker/text/dataset_identity.h) last, written to a temporary and renamed too, and the
// folder synced. InvalidArgument naming the file that failed; temporaries of a failed publish
// remain for the caller to remove.
absl::Status PublishDataset(const PreparedFiles& files);

}  // namespace spheret::train
