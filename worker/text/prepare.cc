#include "worker/text/prepare.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "worker/text/data_files.h"
#include "worker/text/jsonl.h"
#include "worker/text/parquet.h"
#include "worker/text/prepare_publish.h"
#include "worker/text/preparer.h"

namespace spheret::train {
namespace fs = std::filesystem;
namespace {

constexpr const char* kFortunesDir = "/usr/share/games/fortunes";
constexpr size_t kPieceBytes = 1 << 20;  // a text file is tokenized in ~1 MB pieces

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

}  // namespace

bool Preparer::IsParquet(const std::string& file) { return absl::EndsWith(file, ".parquet"); }

bool Preparer::IsJsonl(const std::string& file) const {
  return !options_.text_field.empty() || absl::EndsWith(file, ".jsonl");
}

absl::Status Preparer::Read(const std::string& file, const std::string& field) {
  return IsParquet(file) ? ReadParquet(file, field)
         : IsJsonl(file) ? ReadJsonl(file, field)
                         : ReadTextFile(file);
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
