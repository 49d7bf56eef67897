#include "worker/text/preparer.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include "base/status_macros.h"

namespace spheret::train {
namespace fs = std::filesystem;
namespace {

constexpr size_t kBatchBytesPerThread = 8 << 20;  // text held per thread per batch

// SplitMix64: a document's place in the split depends on the seed and its index only.
double UnitHash(uint64_t seed, uint64_t index) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ULL * (index + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
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

}  // namespace

absl::Status Preparer::Run(const std::vector<std::string>& files, PrepareStats* stats) {
  const auto start = std::chrono::steady_clock::now();
  SPHERET_RETURN_IF_ERROR(Start(files));
  const std::string field = options_.text_field.empty() ? "text" : options_.text_field;
  for (const std::string& file : files) SPHERET_RETURN_IF_ERROR(Read(file, field));
  SPHERET_RETURN_IF_ERROR(Finish());
  if (train_tokens_ == 0) return absl::InvalidArgumentError("the inputs hold no text");
  SPHERET_RETURN_IF_ERROR(Publish(files, stats));
  stats->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return absl::OkStatus();
}

// The tokenizer, the threads, the input's size and kind, and the temporaries opened.
absl::Status Preparer::Start(const std::vector<std::string>& files) {
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
  std::error_code ec;
  for (const std::string& file : files) {
    total_bytes_ += static_cast<int64_t>(fs::file_size(file, ec));
    split_documents_ = split_documents_ || IsParquet(file) || IsJsonl(file);
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
  return absl::OkStatus();
}

// The counts into `stats`, and the temporaries published as the data set.
absl::Status Preparer::Publish(const std::vector<std::string>& files, PrepareStats* stats) {
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
  return PublishDataset(prepared);
}

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

}  // namespace spheret::train
