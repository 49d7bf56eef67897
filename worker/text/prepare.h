// `spheret-lm prepare`: text into a token data set (nanoGPT's format, worker/train/dataset.h),
// streamed with bounded memory on all cores.
//
// Inputs are text files (each file one document), JSONL files (each line a JSON object whose
// `text_field` is one document; a file ending in .jsonl, or any input but Parquet when text_field
// is given) or Parquet files (a file ending in .parquet: each row's value in column `text_field`
// is one document, read row group by row group; worker/text/parquet.h). A Parquet row is a JSONL
// line: a null value is skipped, like a blank line, and counted (PrepareStats, meta.json); an
// empty string is a document; a value longer than max_line_bytes is refused, as a line is. Tokens
// are byte level (vocab 256) or GPT-2's BPE with end-of-text after each document, as nanoGPT's
// prepare.py writes them. When any input is JSONL or Parquet, every document (a line, a row, or a
// text file among the inputs) goes to train or val by a seeded hash of its index (val_fraction is
// the share of documents); inputs of text files only, which are few and large, give the tail
// val_fraction of the token stream to val. Either way a side left empty takes the tail val_fraction
// of the other's tokens.
//
// The token files are written as temporaries in out_dir, every token read back and checked, and
// renamed into place only when all went well, meta.json last (worker/text/prepare_publish.h): a
// prepare that fails leaves out_dir's earlier data set as it was.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "worker/text/jsonl.h"

namespace spheret::train {

struct PrepareOptions {
  std::vector<std::string> inputs;  // Files, or folders whose regular files are read (by name).
  std::string out_dir;              // Created if missing; train.bin, val.bin, meta.json written.
  double val_fraction = 0.1;  // Share of documents (JSONL, Parquet) or of the token stream (text).
  // A folder with GPT-2's encoder.json and vocab.bpe: tokenize with GPT-2 BPE (both files are
  // copied into out_dir). Empty: byte level.
  std::string gpt2_dir;
  // JSONL: the documents' field ("" = "text", for .jsonl files only); Parquet: their column
  // ("" = "text").
  std::string text_field = "";
  uint64_t split_seed = 2357;  // the document split's seed (nanoGPT's prepare.py uses 2357)
  // JSONL: a line longer than this is refused (file and line named) while it is read. Parquet: a
  // value longer than this is refused (file, row group and row named), and a page larger than
  // ParquetPageLimit (worker/text/parquet.h) before it is decompressed.
  int64_t max_line_bytes = kDefaultMaxJsonlLineBytes;
  int threads = 0;  // 0 = every core
  // Called after each batch with (input bytes read, input bytes in all, tokens written).
  std::function<void(int64_t, int64_t, int64_t)> progress = nullptr;
};

struct PrepareStats {
  int64_t files = 0, documents = 0, bytes = 0, train_tokens = 0, val_tokens = 0;
  int64_t parquet_nulls = 0;  // null values in the Parquet inputs' text column: no documents
  int threads = 0;
  int64_t vocab_size = 0;
  double seconds = 0;  // wall time of reading, tokenizing and writing
};

// InvalidArgument naming the file (and line) that failed: for JSONL also a line over
// max_line_bytes, invalid UTF-8, a lone surrogate escape, invalid JSON, not an object, no field;
// for Parquet (file, row group and row) not a Parquet file, no such column or not a string one,
// a page that cannot be read, invalid UTF-8, a value over max_line_bytes, a page over
// ParquetPageLimit (ReadParquetText); FailedPrecondition when this build
// reads no Parquet (saying how to enable it).
absl::Status PrepareText(const PrepareOptions& options, PrepareStats* report);

// The text files of a built-in corpus ("fortunes": Debian's fortunes package), sorted; else
// InvalidArgument saying what is missing and how to install it.
absl::Status BuiltinCorpusFiles(const std::string& name, std::vector<std::string>* files);

// Where a text may be cut into pieces that GPT-2's pre-tokenizer splits exactly as the whole: the
// first offset >= `from` just after a '\n' with an ASCII non-space on each side; text.size() when
// there is none.
size_t SafeCut(const std::string& text, size_t from);

}  // namespace spheret::train
