#include "worker/text/jsonl.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <utility>

#include "absl/strings/str_cat.h"
#include "worker/text/json_field.h"

namespace spheret::train {
namespace {

constexpr size_t kReadBytes = 64 << 10;  // the reader's buffer
constexpr size_t kMaxReasonChars = 160;

}  // namespace

size_t InvalidUtf8At(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    const unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t length = 0;
    unsigned char low = 0x80, high = 0xBF;  // the allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      length = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      length = 3;
      if (c == 0xE0) low = 0xA0;
      if (c == 0xED) high = 0x9F;  // U+D800..U+DFFF are not characters
    } else if (c >= 0xF0 && c <= 0xF4) {
      length = 4;
      if (c == 0xF0) low = 0x90;
      if (c == 0xF4) high = 0x8F;
    } else {
      return i;
    }
    if (i + length > n || s[i + 1] < low || s[i + 1] > high) return i;
    for (size_t k = 2; k < length; ++k) {
      if (s[i + k] < 0x80 || s[i + k] > 0xBF) return i;
    }
    i += length;
  }
  return std::string_view::npos;
}

namespace {

// Takes the string value of one top-level key while nlohmann's SAX parser checks the whole line.
class FieldFinder : public nlohmann::json_sax<nlohmann::json> {
 public:
  FieldFinder(const std::string& field, std::string* text) : field_(field), text_(text) {}

  bool null() override { return Value(nullptr); }
  bool boolean(bool) override { return Value(nullptr); }
  bool number_integer(number_integer_t) override { return Value(nullptr); }
  bool number_unsigned(number_unsigned_t) override { return Value(nullptr); }
  bool number_float(number_float_t, const string_t&) override { return Value(nullptr); }
  bool string(string_t& value) override { return Value(&value); }
  bool binary(binary_t&) override { return Value(nullptr); }
  bool start_object(std::size_t) override {
    if (depth_ == 0) top_object_ = true;
    Value(nullptr);
    ++depth_;
    return true;
  }
  bool key(string_t& key) override {
    if (depth_ == 1) at_field_ = key == field_;
    return true;
  }
  bool end_object() override {
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override {
    Value(nullptr);
    ++depth_;
    return true;
  }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& error) override {
    error_position_ = position;
    error_ = error.what();
    return false;
  }

  bool top_object() const { return top_object_; }
  bool found() const { return found_; }
  // "" when the line parsed.
  const std::string& error() const { return error_; }
  size_t error_position() const { return error_position_; }

 private:
  // A value at the current depth: the field's when it follows the field's key at depth 1.
  bool Value(string_t* value) {
    if (depth_ == 1 && at_field_) {
      found_ = value != nullptr;
      if (found_) text_->swap(*value);
      at_field_ = false;
    }
    return true;
  }

  const std::string& field_;
  std::string* text_;
  int64_t depth_ = 0;
  bool top_object_ = false, at_field_ = false, found_ = false;
  std::string error_;
  size_t error_position_ = 0;
};

// nlohmann's reason without its prefix ("[json.exception...] parse error at line 1, column 9: ")
// and the input it echoes ("; last read: '...'"), bounded.
std::string Reason(const std::string& what) {
  size_t begin = what.find("column ");
  begin = begin == std::string::npos ? 0 : what.find(": ", begin);
  begin = begin == std::string::npos ? 0 : begin + 2;
  const size_t end = what.find("; last read", begin);
  std::string reason = what.substr(begin, end == std::string::npos ? end : end - begin);
  if (reason.size() > kMaxReasonChars) reason = reason.substr(0, kMaxReasonChars) + "...";
  return reason;
}

}  // namespace

JsonlReader::JsonlReader(std::istream* in, std::string name, int64_t max_line_bytes)
    : in_(in), name_(std::move(name)), max_line_bytes_(max_line_bytes), buffer_(kReadBytes) {}

std::string JsonlReader::Where() const { return absl::StrCat(name_, " line ", line_number_, ": "); }

absl::Status JsonlReader::Next(std::string* line, bool* done) {
  line->clear();
  *done = false;
  bool started = false;  // a byte of this line (or its '\n') was read
  for (;;) {
    if (begin_ == end_) {
      in_->read(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
      begin_ = 0;
      end_ = static_cast<size_t>(in_->gcount());
      if (end_ == 0) {
        if (in_->bad()) {
          return absl::InvalidArgumentError(absl::StrCat("cannot read ", name_, " after line ",
                                                         line_number_, ": ", std::strerror(errno)));
        }
        *done = !started;
        return absl::OkStatus();
      }
    }
    if (!started) ++line_number_;
    started = true;
    const char* from = buffer_.data() + begin_;
    const auto* newline = static_cast<const char*>(std::memchr(from, '\n', end_ - begin_));
    const size_t take = newline != nullptr ? static_cast<size_t>(newline - from) : end_ - begin_;
    if (static_cast<int64_t>(line->size() + take) > max_line_bytes_) {
      return absl::InvalidArgumentError(
          absl::StrCat(Where(), "longer than the limit of ", max_line_bytes_,
                       " bytes for a JSONL line (raise it with --max-line-bytes)"));
    }
    line->append(from, take);
    begin_ += take + (newline != nullptr ? 1 : 0);
    if (newline != nullptr) return absl::OkStatus();
  }
}

namespace {

// Why `line` is not one JSON object (UTF-8 first, then the parser's reason), or OK.
absl::Status ScanObject(std::string_view line, FieldFinder* finder) {
  if (const size_t bad = InvalidUtf8At(line); bad != std::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("invalid UTF-8 at byte ", bad + 1));
  }
  nlohmann::json::sax_parse(line.begin(), line.end(), finder);
  if (!finder->error().empty()) {
    const std::string reason = Reason(finder->error());
    if (reason.find("surrogate") != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("a lone surrogate escape (\\uD800-\\uDFFF without its pair) at byte ",
                       finder->error_position(), " (", reason, ")"));
    }
    return absl::InvalidArgumentError(
        absl::StrCat("not valid JSON at byte ", finder->error_position(), ": ", reason));
  }
  if (!finder->top_object()) return absl::InvalidArgumentError("not a JSON object");
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckJsonlObject(std::string_view line) {
  std::string ignored;
  FieldFinder finder("", &ignored);
  return ScanObject(line, &finder);
}

absl::Status ReadJsonlText(std::string_view line, const std::string& field, std::string* text) {
  // A corpus's line in one pass; any other (and the reason for a refusal) from nlohmann's parser.
  if (InvalidUtf8At(line) == std::string_view::npos && ScanJsonStringField(line, field, text)) {
    return absl::OkStatus();
  }
  text->clear();
  FieldFinder finder(field, text);
  if (absl::Status scanned = ScanObject(line, &finder); !scanned.ok()) return scanned;
  if (!finder.found()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no string field '", field.substr(0, 100),
                     "' (name the documents' field with --text-field)"));
  }
  return absl::OkStatus();
}

}  // namespace spheret::train
