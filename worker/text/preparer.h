// The engine of `spheret-lm prepare` (worker/text/prepare.h), internal to spheret_text: the
// inputs read into pieces of documents (prepare.cc), and the pieces tokenized on every thread in
// batches and written in order, each document to its side of the split, into temporaries that
// PublishDataset (prepare_publish.h) makes the data set (preparer.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "worker/text/bpe.h"
#include "worker/text/prepare.h"
#include "worker/text/prepare_publish.h"

namespace spheret::train {

// A piece of a document, in stream order.
struct Piece {
  std::string text;
  int64_t document = 0;
  bool last = true;  // the document's last piece (end-of-text follows it)
  std::vector<uint16_t> ids;
};

// One prepare: Run once. Not thread-safe (it runs its own threads).
class Preparer {
 public:
  explicit Preparer(const PrepareOptions& options)
      : options_(options),
        train_path_(TemporaryPath(options.out_dir, "train.bin")),
        val_path_(TemporaryPath(options.out_dir, "val.bin")) {}
  // Removes the temporaries that remain (all of them when prepare failed).
  ~Preparer();

  // Prepares `files` (listed, non-empty) into options.out_dir; PrepareText's errors.
  absl::Status Run(const std::vector<std::string>& files, PrepareStats* stats);

 private:
  // The inputs (prepare.cc): each file by its kind, its documents added as pieces.
  static bool IsParquet(const std::string& file);
  bool IsJsonl(const std::string& file) const;
  absl::Status Read(const std::string& file, const std::string& field);
  absl::Status ReadTextFile(const std::string& file);
  absl::Status ReadJsonl(const std::string& file, const std::string& field);
  absl::Status ReadParquet(const std::string& file, const std::string& column);

  // The pipeline (preparer.cc).
  absl::Status Start(const std::vector<std::string>& files);
  absl::Status Add(Piece piece);
  absl::Status Flush();
  void Tokenize(size_t begin, size_t end, BpeCache* cache);
  absl::Status Finish();
  absl::Status Publish(const std::vector<std::string>& files, PrepareStats* stats);

  const PrepareOptions& options_;
  Gpt2Bpe bpe_;
  bool gpt2_ = false;
  int threads_ = 1;
  std::vector<BpeCache> caches_;
  std::vector<Piece> batch_;
  size_t batch_bytes_ = 0;
  int64_t documents_ = 0, bytes_read_ = 0, total_bytes_ = 0;
  int64_t parquet_nulls_ = 0;     // null values of Parquet inputs, skipped
  bool split_documents_ = false;  // an input is JSONL or Parquet: split by document
  const std::string train_path_, val_path_;
  std::ofstream train_, val_;
  int64_t train_tokens_ = 0, val_tokens_ = 0;
};

}  // namespace spheret::train
