#include "worker/text/json_field.h"

#include <cstddef>
#include <cstdint>

namespace spheret::train {
namespace {

constexpr int kMaxJsonDepth = 64;
constexpr ptrdiff_t kMaxNumberChars = 300;  // no overflow to infinity (nlohmann refuses one)

// A recursive-descent recognizer of one line; each method consumes one item or returns false.
class Scanner {
 public:
  explicit Scanner(std::string_view line) : at_(line.data()), end_(line.data() + line.size()) {}

  bool done() const { return at_ == end_; }
  char Peek() const { return at_ < end_ ? *at_ : '\0'; }
  bool Consume(char c) {
    if (at_ == end_ || *at_ != c) return false;
    ++at_;
    return true;
  }
  void SkipSpace() {
    while (at_ < end_ && (*at_ == ' ' || *at_ == '\n' || *at_ == '\r' || *at_ == '\t')) ++at_;
  }
  // A string, unescaped into *out unless out is null.
  bool String(std::string* out);
  bool Value(int depth);

 private:
  bool Escape(std::string* out);
  bool Hex4(uint32_t* value);
  bool Number();
  bool Literal(std::string_view word);
  bool Object(int depth);
  bool Array(int depth);

  const char* at_;
  const char* end_;
};

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool Scanner::String(std::string* out) {
  if (!Consume('"')) return false;
  for (;;) {
    const char* run = at_;
    // The bytes that stand for themselves: all but '"', '\\' and controls (UTF-8 is checked).
    while (at_ < end_ && *at_ != '"' && *at_ != '\\' && static_cast<unsigned char>(*at_) >= 0x20)
      ++at_;
    if (out != nullptr) out->append(run, static_cast<size_t>(at_ - run));
    if (at_ == end_ || static_cast<unsigned char>(*at_) < 0x20) return false;
    if (*at_++ == '"') return true;
    if (!Escape(out)) return false;
  }
}

// The escape after a backslash; a surrogate escape must be a high one and its low one.
bool Scanner::Escape(std::string* out) {
  if (at_ == end_) return false;
  char c = *at_++;
  switch (c) {
    case '"':
    case '\\':
    case '/':
      break;
    case 'b':
      c = '\b';
      break;
    case 'f':
      c = '\f';
      break;
    case 'n':
      c = '\n';
      break;
    case 'r':
      c = '\r';
      break;
    case 't':
      c = '\t';
      break;
    case 'u': {
      uint32_t cp = 0, low = 0;
      if (!Hex4(&cp) || (cp >= 0xDC00 && cp <= 0xDFFF)) return false;
      if (cp >= 0xD800 && cp <= 0xDBFF) {
        if (!Consume('\\') || !Consume('u') || !Hex4(&low) || low < 0xDC00 || low > 0xDFFF)
          return false;
        cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
      }
      if (out != nullptr) AppendUtf8(cp, out);
      return true;
    }
    default:
      return false;
  }
  if (out != nullptr) out->push_back(c);
  return true;
}

bool Scanner::Hex4(uint32_t* value) {
  if (end_ - at_ < 4) return false;
  for (int i = 0; i < 4; ++i) {
    const char c = *at_++;
    const int digit = (c >= '0' && c <= '9')   ? c - '0'
                      : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                      : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                               : -1;
    if (digit < 0) return false;
    *value = *value << 4 | static_cast<uint32_t>(digit);
  }
  return true;
}

// -?(0|[1-9][0-9]*)(\.[0-9]+)?, short; an exponent is left to the parser.
bool Scanner::Number() {
  const char* start = at_;
  auto digits = [&] {
    const char* from = at_;
    while (at_ < end_ && *at_ >= '0' && *at_ <= '9') ++at_;
    return at_ > from;
  };
  Consume('-');
  if (!Consume('0') && (Peek() < '1' || Peek() > '9' || !digits())) return false;
  if (Consume('.') && !digits()) return false;
  return Peek() != 'e' && Peek() != 'E' && at_ - start <= kMaxNumberChars;
}

bool Scanner::Literal(std::string_view word) {
  if (static_cast<size_t>(end_ - at_) < word.size() || std::string_view(at_, word.size()) != word)
    return false;
  at_ += word.size();
  return true;
}

bool Scanner::Value(int depth) {
  switch (Peek()) {
    case '"':
      return String(nullptr);
    case '{':
      return Object(depth + 1);
    case '[':
      return Array(depth + 1);
    case 't':
      return Literal("true");
    case 'f':
      return Literal("false");
    case 'n':
      return Literal("null");
    default:
      return Number();
  }
}

bool Scanner::Object(int depth) {
  if (depth > kMaxJsonDepth || !Consume('{')) return false;
  SkipSpace();
  if (Consume('}')) return true;
  do {
    SkipSpace();
    if (!String(nullptr)) return false;
    SkipSpace();
    if (!Consume(':')) return false;
    SkipSpace();
    if (!Value(depth)) return false;
    SkipSpace();
  } while (Consume(','));
  return Consume('}');
}

bool Scanner::Array(int depth) {
  if (depth > kMaxJsonDepth || !Consume('[')) return false;
  SkipSpace();
  if (Consume(']')) return true;
  do {
    SkipSpace();
    if (!Value(depth)) return false;
    SkipSpace();
  } while (Consume(','));
  return Consume(']');
}

}  // namespace

bool ScanJsonStringField(std::string_view line, std::string_view field, std::string* text) {
  Scanner scanner(line);
  scanner.SkipSpace();
  if (!scanner.Consume('{')) return false;
  bool found = false;
  std::string key;
  scanner.SkipSpace();
  if (!scanner.Consume('}')) {
    do {
      scanner.SkipSpace();
      key.clear();
      if (!scanner.String(&key)) return false;
      scanner.SkipSpace();
      if (!scanner.Consume(':')) return false;
      scanner.SkipSpace();
      if (key == field) {  // the last one counts; one that is no string goes to the parser
        text->clear();
        text->reserve(line.size());  // at most the line's bytes: no growth while appending
        if (scanner.Peek() != '"' || !scanner.String(text)) return false;
        found = true;
      } else if (!scanner.Value(1)) {
        return false;
      }
      scanner.SkipSpace();
    } while (scanner.Consume(','));
    if (!scanner.Consume('}')) return false;
  }
  scanner.SkipSpace();
  return found && scanner.done();
}

}  // namespace spheret::train
