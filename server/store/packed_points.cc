#include "server/store/packed_points.h"

#include <charconv>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace spheret::store {
namespace {

void AppendInt(int64_t value, std::string* out) {
  char buffer[24];
  const auto end = std::to_chars(buffer, buffer + sizeof buffer, value).ptr;
  out->append(buffer, end);
}

// A cursor over the text of one JSON array of points.
class Reader {
 public:
  explicit Reader(std::string_view text) : text_(text) {}

  bool AtEnd() {
    SkipSpace();
    return pos_ >= text_.size();
  }
  // Consumes `c` (after any white space); false when the next character is another.
  bool Take(char c) {
    SkipSpace();
    if (pos_ >= text_.size() || text_[pos_] != c) return false;
    ++pos_;
    return true;
  }
  bool Int(int64_t* value) {
    SkipSpace();
    const auto [end, error] =
        std::from_chars(text_.data() + pos_, text_.data() + text_.size(), *value);
    if (error != std::errc()) return false;
    pos_ = end - text_.data();
    return true;
  }
  // A number or null (NaN). Numbers past the double range read as infinities, below it as zeros.
  bool Value(double* value) {
    SkipSpace();
    if (text_.substr(pos_, 4) == "null") {
      pos_ += 4;
      *value = std::nan("");
      return true;
    }
    const char* begin = text_.data() + pos_;
    const auto [end, error] = std::from_chars(begin, text_.data() + text_.size(), *value);
    if (error == std::errc::result_out_of_range) {
      const std::string_view number(begin, end - begin);
      const size_t exponent = number.find_first_of("eE");
      const bool tiny = exponent != std::string_view::npos && exponent + 1 < number.size() &&
                        number[exponent + 1] == '-';
      const double magnitude = tiny ? 0.0 : std::numeric_limits<double>::infinity();
      *value = number.front() == '-' ? -magnitude : magnitude;
    } else if (error != std::errc()) {
      return false;
    }
    pos_ = end - text_.data();
    return true;
  }
  size_t pos() const { return pos_; }

 private:
  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\t' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

void AppendValue(double value, std::string* out) {
  if (!std::isfinite(value)) {
    out->append("null");
  } else if (value == 0) {
    out->push_back('0');
  } else {
    char buffer[32];
    const auto end = std::to_chars(buffer, buffer + sizeof buffer, value).ptr;
    out->append(buffer, end);
  }
}

void EncodePoints(const std::vector<PackedPoint>& points, int64_t wall_base, std::string* out) {
  out->reserve(out->size() + points.size() * 32 + 2);
  out->push_back('[');
  for (size_t i = 0; i < points.size(); ++i) {
    if (i > 0) out->push_back(',');
    out->push_back('[');
    AppendInt(points[i].step, out);
    out->push_back(',');
    AppendValue(points[i].value, out);
    out->push_back(',');
    AppendInt(points[i].wall_ms - wall_base, out);
    out->push_back(']');
  }
  out->push_back(']');
}

absl::Status DecodePoints(std::string_view json, int64_t wall_base, std::vector<PackedPoint>* out) {
  Reader reader(json);
  auto error = [&reader, json](const char* what) {
    return absl::InvalidArgumentError(absl::StrCat("packed metric values: expected ", what,
                                                   " at offset ", reader.pos(), " of '",
                                                   std::string(json.substr(0, 80)), "'"));
  };
  if (!reader.Take('[')) return error("'['");
  if (reader.Take(']')) return reader.AtEnd() ? absl::OkStatus() : error("the end");
  do {
    PackedPoint point;
    int64_t offset = 0;
    if (!reader.Take('[')) return error("'[' of a point");
    if (!reader.Int(&point.step)) return error("an integer step");
    if (!reader.Take(',')) return error("','");
    if (!reader.Value(&point.value)) return error("a number or null");
    if (!reader.Take(',')) return error("','");
    if (!reader.Int(&offset)) return error("an integer wall_ms offset");
    if (!reader.Take(']')) return error("']' of a point");
    point.wall_ms = wall_base + offset;
    out->push_back(point);
  } while (reader.Take(','));
  if (!reader.Take(']')) return error("',' or ']'");
  return reader.AtEnd() ? absl::OkStatus() : error("the end");
}

}  // namespace spheret::store
