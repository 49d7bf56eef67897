#include "worker/text/prepare.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "worker/text/bpe.h"
#include "worker/text/data_files.h"
#include "worker/text/jsonl.h"
#include "worker/text/parquet.h"
#include "worker/text/prepare_publish.h"

namespace spheret::train {
namespace fs = std::filesystem;
namespace {

constexpr const char* kFortunesDir = "/usr/share/games/fortunes";
constexpr size_t kPieceBytes = 1 << 20;           // a text file is tokenized in ~1 MB pieces
constexpr size_t kBatchBytesPerThread = 8 << 20;  // text held per thread per batch

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

bool AsciiSpace(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

// SplitMix64: a document's place in the split depends on the seed and its index only.
double UnitHash(uint64_t seed, uint64_t index) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ULL * (index + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

// A piece of a document, in stream order.
struct Piece {
  std::string text;
  int64_t document = 0;
  bool last = true;  // the document's last piece (end-of-text follows it)
  std::vector<uint16_t> ids;
};

class Preparer {
 public:
  explicit Preparer(const PrepareOptions& options)
      : options_(options),
        train_path_(TemporaryPath(options.out_dir, "train.bin")),
        val_path_(TemporaryPath(options.out_dir, "val.bin")) {}
  // Removes the temporaries that remain (all of them when prepare failed).
  ~Preparer();

  absl::Status Run(const std::vector<std::string>& files, PrepareStats* stats);

 private:
  absl::Status ReadTextFile(const std::string& file);
  absl::Status ReadJsonl(const std::string& file, const std::string& field);
  absl::Status ReadParquet(const std::string& file, const std::string& column);
  absl::Status Add(Piece piece);
  absl::Status Flush();
  void Tokenize(size_t begin, size_t end, BpeCache* cache);
  absl::Status Finish();

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

Preparer::~Preparer() {
  train_.close();
  val_.close();
  std::error_code ec;
  fs::remove(train_path_, ec);
  fs::remove(val_path_, ec);
}

absl::Status Preparer::Add(Piece piece) {
  batch_bytes_ += piece.text.size();
  bytes_read_ += static_cast<int64_t>(piece.text.size());
  batch_.push_back(std::move(piece));
  if (batch_bytes_ >= kBatchBytesPerThread * static_cast<size_t>(threads_)) return Flush();
  return absl::OkStatus();
}

absl::Status Preparer::ReadTextFile(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return absl::InvalidArgumentError("cannot read " + file + ": " + std::strerror(errno));
  const int64_t document = documents_++;
  std::string carry;
  bool closed = false;  // the document's last piece was added
  std::vector<char> buffer(kPieceBytes);
  for (;;) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const auto got = static_cast<size_t>(in.gcount());
    carry.append(buffer.data(), got);
    const bool end = got < buffer.size();
    while (carry.size() >= kPieceBytes || (end && !carry.empty())) {
      size_t cut = end ? carry.size() : SafeCut(carry, kPieceBytes / 2);
      if (cut >= carry.size() && !end) break;  // no safe cut yet: read on
      Piece piece{carry.substr(0, cut), document, end && cut == carry.size(), {}};
      closed = piece.last;
      carry.erase(0, cut);
      SPHERET_RETURN_IF_ERROR(Add(std::move(piece)));
    }
    if (end) break;
  }
  if (!closed) SPHERET_RETURN_IF_ERROR(Add({"", document, true, {}}));  // end-of-text still follows
  if (in.bad())
    return absl::InvalidArgumentError("cannot read " + file + ": " + std::strerror(errno));
  return absl::OkStatus();
}

absl::Status Preparer::ReadJsonl(const std::string& file, const std::string& field) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return absl::InvalidArgumentError("cannot read " + file + ": " + std::strerror(errno));
  JsonlReader reader(&in, file, options_.max_line_bytes);
  std::string line, text;
  for (;;) {
    bool done = false;
    SPHERET_RETURN_IF_ERROR(reader.Next(&line, &done));
    if (done) return absl::OkStatus();
    bytes_read_ += 1;  // the newline
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (absl::Status error = ReadJsonlText(line, field, &text); !error.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(reader.Where(), error.message()));
    }
    bytes_read_ += static_cast<int64_t>(line.size() - text.size());
    SPHERET_RETURN_IF_ERROR(Add({std::move(text), documents_++, true, {}}));
  }
}

// A Parquet row is a JSONL line: a non-null value is a document, a null none (a blank line),
// counted; a value is limited as a line is.
absl::Status Preparer::ReadParquet(const std::string& file, const std::string& column) {
  const int64_t start = bytes_read_;
  ParquetReadOptions limits;
  limits.max_value_bytes = options_.max_line_bytes;
  ParquetTextCounts counts;
  const absl::Status read = ReadParquetText(
      file, column,
      [&](std::string_view text, const ParquetRow& row) {
        // Progress counts the file's bytes, pro rata of its rows (Add counts the text's).
        bytes_read_ = start + row.bytes_done - static_cast<int64_t>(text.size());
        return Add({std::string(text), documents_++, true, {}});
      },
      limits, &counts);
  parquet_nulls_ += counts.nulls;
  SPHERET_RETURN_IF_ERROR(read);
  std::error_code ec;
  bytes_read_ = start + static_cast<int64_t>(fs::file_size(file, ec));  // its trailing nulls too
  return absl::OkStatus();
}

void Preparer::Tokenize(size_t begin, size_t end, BpeCache* cache) {
  for (size_t i = begin; i < end; ++i) {
    Piece& piece = batch_[i];
    if (!gpt2_) {
      piece.ids.assign(piece.text.begin(), piece.text.end());
      for (uint16_t& id : piece.ids) id &= 0xFF;  // bytes, not signed chars
      continue;
    }
    piece.ids.clear();
    piece.ids.reserve(piece.text.size() / 3);  // English runs about 4 bytes a token
    bpe_.Encode(piece.text, cache, &piece.ids);
    if (piece.last && bpe_.eot() >= 0) piece.ids.push_back(static_cast<uint16_t>(bpe_.eot()));
  }
}

// Tokenizes the batch on every thread (contiguous ranges of about equal bytes) and writes it in
// order, each document to its side of the split.
absl::Status Preparer::Flush() {
  if (batch_.empty()) return absl::OkStatus();
  std::vector<std::thread> workers;
  const size_t share = batch_bytes_ / static_cast<size_t>(threads_) + 1;
  size_t begin = 0;
  for (int t = 0; t < threads_ && begin < batch_.size(); ++t) {
    size_t end = begin, bytes = 0;
    while (end < batch_.size() && (bytes < share || t == threads_ - 1))
      bytes += batch_[end++].text.size();
    workers.emplace_back([this, begin, end, t] { Tokenize(begin, end, &caches_[t]); });
    begin = end;
  }
  for (std::thread& worker : workers) worker.join();
  for (const Piece& piece : batch_) {
    const bool val =
        split_documents_ && UnitHash(options_.split_seed, piece.document) < options_.val_fraction;
    std::ofstream& out = val ? val_ : train_;
    out.write(reinterpret_cast<const char*>(piece.ids.data()),
              static_cast<std::streamsize>(piece.ids.size() * sizeof(uint16_t)));
    (val ? val_tokens_ : train_tokens_) += static_cast<int64_t>(piece.ids.size());
  }
  batch_.clear();
  batch_bytes_ = 0;
  if (!train_ || !val_) {
    return absl::InvalidArgumentError("cannot write into " + options_.out_dir + ": " +
                                      std::strerror(errno));
  }
  if (options_.progress) options_.progress(bytes_read_, total_bytes_, train_tokens_ + val_tokens_);
  return absl::OkStatus();
}

// Moves the tail `fraction` of `from`'s tokens to the end of the (empty) `to`.
absl::Status MoveTail(const std::string& from, const std::string& to, double fraction,
                      int64_t* from_tokens, int64_t* to_tokens) {
  const int64_t keep = static_cast<int64_t>(static_cast<double>(*from_tokens) * (1.0 - fraction));
  std::ifstream in(from, std::ios::binary);
  std::ofstream out(to, std::ios::binary | std::ios::trunc);
  in.seekg(keep * static_cast<int64_t>(sizeof(uint16_t)));
  std::vector<char> buffer(8 << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    out.write(buffer.data(), in.gcount());
  }
  out.close();
  std::error_code ec;
  if (!out) return absl::InvalidArgumentError("cannot write " + to + ": " + std::strerror(errno));
  fs::resize_file(from, static_cast<uintmax_t>(keep) * sizeof(uint16_t), ec);
  if (ec) return absl::InvalidArgumentError("cannot truncate " + from + ": " + ec.message());
  *to_tokens = *from_tokens - keep;
  *from_tokens = keep;
  return absl::OkStatus();
}

absl::Status Preparer::Finish() {
  SPHERET_RETURN_IF_ERROR(Flush());
  train_.close();
  val_.close();
  if (!train_ || !val_) {
    return absl::InvalidArgumentError("cannot write into " + options_.out_dir + ": " +
                                      std::strerror(errno));
  }
  const std::string& train = train_path_;
  const std::string& val = val_path_;
  if (train_tokens_ == 0 && val_tokens_ > 0) {  // every document fell to val
    std::error_code ec;
    fs::rename(val, train, ec);
    if (ec) return absl::InvalidArgumentError("cannot rename " + val + ": " + ec.message());
    std::swap(train_tokens_, val_tokens_);
  }
  if (val_tokens_ == 0) {
    SPHERET_RETURN_IF_ERROR(
        MoveTail(train, val, options_.val_fraction, &train_tokens_, &val_tokens_));
  }
  return absl::OkStatus();
}

absl::Status Preparer::Run(const std::vector<std::string>& files, PrepareStats* stats) {
  const auto start = std::chrono::steady_clock::now();
  gpt2_ = !options_.gpt2_dir.empty();
  if (gpt2_) {
    SPHERET_RETURN_IF_ERROR(
        bpe_.Load(options_.gpt2_dir + "/encoder.json", options_.gpt2_dir + "/vocab.bpe"));
    if (bpe_.vocab_size() > 65536)
      return absl::InvalidArgumentError("the GPT-2 vocabulary does not fit uint16 tokens");
  }
  threads_ = options_.threads > 0
                 ? options_.threads
                 : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  caches_.resize(static_cast<size_t>(threads_));
  const auto is_parquet = [](const std::string& file) { return absl::EndsWith(file, ".parquet"); };
  const auto is_jsonl = [&](const std::string& file) {
    return !options_.text_field.empty() || absl::EndsWith(file, ".jsonl");
  };
  std::error_code ec;
  for (const std::string& file : files) {
    total_bytes_ += static_cast<int64_t>(fs::file_size(file, ec));
    split_documents_ = split_documents_ || is_parquet(file) || is_jsonl(file);
  }
  fs::create_directories(options_.out_dir, ec);
  if (ec)
    return absl::InvalidArgumentError("cannot create " + options_.out_dir + ": " + ec.message());
  // Temporaries: the folder's data set stays whole until PublishDataset replaces it.
  train_.open(train_path_, std::ios::binary | std::ios::trunc);
  val_.open(val_path_, std::ios::binary | std::ios::trunc);
  if (!train_ || !val_) {
    return absl::InvalidArgumentError("cannot write into " + options_.out_dir + ": " +
                                      std::strerror(errno));
  }
  const std::string field = options_.text_field.empty() ? "text" : options_.text_field;
  for (const std::string& file : files) {
    SPHERET_RETURN_IF_ERROR(is_parquet(file) ? ReadParquet(file, field)
                            : is_jsonl(file) ? ReadJsonl(file, field)
                                             : ReadTextFile(file));
  }
  SPHERET_RETURN_IF_ERROR(Finish());
  if (train_tokens_ == 0) return absl::InvalidArgumentError("the inputs hold no text");
  stats->files = static_cast<int64_t>(files.size());
  stats->documents = documents_;
  stats->parquet_nulls = parquet_nulls_;
  stats->bytes = total_bytes_;
  stats->train_tokens = train_tokens_;
  stats->val_tokens = val_tokens_;
  stats->threads = threads_;
  stats->vocab_size = gpt2_ ? bpe_.vocab_size() : 256;
  PreparedFiles prepared{options_.out_dir,        train_path_,       val_path_,
                         train_tokens_,           val_tokens_,       stats->vocab_size,
                         gpt2_ ? "gpt2" : "byte", options_.gpt2_dir, documents_,
                         parquet_nulls_};
  SPHERET_RETURN_IF_ERROR(PublishDataset(prepared));
  stats->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return absl::OkStatus();
}

}  // namespace

size_t SafeCut(const std::string& text, size_t from) {
  for (size_t p = std::max<size_t>(from, 2); p < text.size(); ++p) {
    const auto before = static_cast<unsigned char>(text[p - 2]);
    const auto after = static_cast<unsigned char>(text[p]);
    if (text[p - 1] == '\n' && before < 0x80 && !AsciiSpace(before) && after < 0x80 &&
        !AsciiSpace(after)) {
      return p;
    }
  }
  return text.size();
}

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

absl::Status PrepareText(const PrepareOptions& options, PrepareStats* report) {
  if (!(options.val_fraction > 0 && options.val_fraction < 1)) {
    return absl::InvalidArgumentError("val_fraction must be in (0, 1)");
  }
  std::vector<std::string> files;
  for (const std::string& input : options.inputs) {
    SPHERET_RETURN_IF_ERROR(ListInput(input, &files));
  }
  if (files.empty()) return absl::InvalidArgumentError("no input files to prepare");
  Preparer preparer(options);
  return preparer.Run(files, report);
}

}  // namespace spheret::train
