#include "worker/text/pickle.h"

#include <cstdint>
#include <cstring>
#include <iterator>
#include <unordered_map>
#include <utility>
#include <vector>

namespace spheret::train {
namespace {

using nlohmann::json;

// Memo copies are the one way a pickle grows faster than its bytes (each BINGET of a list that
// was appended to itself doubles it: 150 bytes reach a billion values). Every value copied to or
// from the memo, or dumped as a dict key, is counted against this budget (values plus string
// bytes) and may nest at most kMaxCopyDepth deep (copies and dumps recurse).
constexpr int64_t kCopyBudget = 1 << 19;
constexpr int64_t kMaxCopyDepth = 512;
constexpr char kTooLarge[] = "memo copies past the limit of 524288 values or 512 levels of nesting";

// Values (and string bytes) in `value`, without recursion; stops past `limit` or kMaxCopyDepth
// (returning more than `limit`).
int64_t CopyCost(const json& value, int64_t limit) {
  int64_t cost = 0;
  std::vector<std::pair<const json*, int64_t>> pending = {{&value, 0}};
  while (!pending.empty() && cost <= limit) {
    const auto [item, depth] = pending.back();
    pending.pop_back();
    if (depth > kMaxCopyDepth) return limit + 1;
    cost +=
        1 +
        (item->is_string() ? static_cast<int64_t>(item->get_ref<const std::string&>().size()) : 0);
    if (item->is_structured()) {
      for (const json& child : *item) pending.emplace_back(&child, depth + 1);
      if (item->is_object()) {
        for (const auto& [key, child] : item->items()) cost += static_cast<int64_t>(key.size());
      }
    }
  }
  return cost;
}

class Unpickler {
 public:
  explicit Unpickler(std::string_view bytes) : bytes_(bytes) {}

  std::string Run(json* value);

 private:
  // Reads n little-endian bytes as an unsigned integer.
  bool Unsigned(size_t n, uint64_t* out) {
    if (pos_ + n > bytes_.size()) return false;
    *out = 0;
    for (size_t i = 0; i < n; ++i) *out |= uint64_t(uint8_t(bytes_[pos_ + i])) << (8 * i);
    pos_ += n;
    return true;
  }
  bool Text(size_t n, std::string* out) {
    if (pos_ + n > bytes_.size()) return false;
    out->assign(bytes_.substr(pos_, n));
    pos_ += n;
    return true;
  }
  // A dict key as text: a str as it is, anything else as its JSON (charged as a copy).
  bool Key(const json& key, std::string* text) {
    if (key.is_string()) {
      *text = key.get<std::string>();
      return true;
    }
    if (!Charge(key)) return false;
    *text = key.dump(-1, ' ', false, json::error_handler_t::replace);
    return true;
  }
  // Counts a copy of `value` against kCopyBudget; false when it would go over.
  bool Charge(const json& value) {
    budget_ -= CopyCost(value, budget_);
    return budget_ >= 0;
  }
  // A str of the pickle: UTF-8 text in Python, so anything else is damage (and JSON cannot hold
  // it).
  bool Unicode(size_t n, std::string* out) {
    if (!Text(n, out)) return false;
    try {
      (void)json(*out).dump();
      return true;
    } catch (const json::type_error&) {
      return false;
    }
  }
  // One opcode: "" or what is wrong. Constant handles the framing, MARK and the opcodes that push
  // a constant, Scalar those that push a number or a str, Memo the memo, Structure containers and
  // STOP; each sets *known false for an opcode that is not its own.
  std::string Step(uint8_t op);
  std::string Constant(uint8_t op, bool* known);
  std::string Scalar(uint8_t op, bool* known);
  std::string Memo(uint8_t op, bool* known);
  std::string Structure(uint8_t op, bool* known);
  std::string Long1();
  std::string BinFloat();
  // Pops back to the last MARK; the items above it, oldest first.
  bool PopMark(std::vector<json>* items);

  std::string_view bytes_;
  size_t pos_ = 0;
  std::vector<json> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, json> memo_;
  int64_t budget_ = kCopyBudget;
  bool done_ = false;
};

bool Unpickler::PopMark(std::vector<json>* items) {
  if (marks_.empty() || marks_.back() > stack_.size()) return false;
  items->assign(std::make_move_iterator(stack_.begin() + static_cast<long>(marks_.back())),
                std::make_move_iterator(stack_.end()));
  stack_.resize(marks_.back());
  marks_.pop_back();
  return true;
}

std::string Unpickler::Long1() {
  uint64_t size = 0, raw = 0;
  if (!Unsigned(1, &size) || size > 8 || !Unsigned(size, &raw))
    return "LONG1 too large or truncated";
  const bool negative = size > 0 && (raw >> (8 * size - 1)) & 1;
  if (negative && size < 8) raw |= ~uint64_t(0) << (8 * size);
  stack_.push_back(static_cast<int64_t>(raw));
  return "";
}

std::string Unpickler::BinFloat() {
  if (pos_ + 8 > bytes_.size()) return "truncated";
  uint64_t bits = 0;
  for (int i = 0; i < 8; ++i) bits = (bits << 8) | uint8_t(bytes_[pos_ + i]);
  pos_ += 8;
  double value;
  std::memcpy(&value, &bits, sizeof(value));
  stack_.push_back(value);
  return "";
}

std::string Unpickler::Constant(uint8_t op, bool* known) {
  uint64_t n = 0;
  switch (op) {
    case 0x80:
      return Unsigned(1, &n) ? "" : "truncated";  // PROTO
    case 0x95:
      return Unsigned(8, &n) ? "" : "truncated";  // FRAME
    case '}':
      stack_.push_back(json::object());
      return "";  // EMPTY_DICT
    case ']':
      stack_.push_back(json::array());
      return "";  // EMPTY_LIST
    case '(':
      marks_.push_back(stack_.size());
      return "";  // MARK
    case 'N':
      stack_.push_back(nullptr);
      return "";  // NONE
    case 0x88:
      stack_.push_back(true);
      return "";  // NEWTRUE
    case 0x89:
      stack_.push_back(false);
      return "";  // NEWFALSE
    default:
      *known = false;
      return "";
  }
}

std::string Unpickler::Scalar(uint8_t op, bool* known) {
  uint64_t n = 0;
  std::string text;
  const std::string truncated = "truncated";
  switch (op) {
    case 'K':
      if (!Unsigned(1, &n)) return truncated;
      stack_.push_back(n);
      return "";  // BININT1
    case 'M':
      if (!Unsigned(2, &n)) return truncated;
      stack_.push_back(n);
      return "";  // BININT2
    case 'J':     // BININT
      if (!Unsigned(4, &n)) return truncated;
      stack_.push_back(static_cast<int64_t>(static_cast<int32_t>(n)));
      return "";
    case 0x8a:  // LONG1: n bytes, little-endian two's complement
      return Long1();
    case 'G':  // BINFLOAT: 8 bytes big-endian
      return BinFloat();
    case 0x8c:  // SHORT_BINUNICODE
      if (!Unsigned(1, &n) || !Unicode(n, &text)) return truncated + " or not UTF-8";
      stack_.push_back(text);
      return "";
    case 'X':  // BINUNICODE
      if (!Unsigned(4, &n) || !Unicode(n, &text)) return truncated + " or not UTF-8";
      stack_.push_back(text);
      return "";
    default:
      *known = false;
      return "";
  }
}

std::string Unpickler::Memo(uint8_t op, bool* known) {
  uint64_t n = 0;
  switch (op) {
    case 0x94:  // MEMOIZE
      if (stack_.empty()) return "MEMOIZE on an empty stack";
      if (!Charge(stack_.back())) return kTooLarge;
      memo_[memo_.size()] = stack_.back();
      return "";
    case 'q':
    case 'r':  // BINPUT, LONG_BINPUT
      if (!Unsigned(op == 'q' ? 1 : 4, &n) || stack_.empty()) return "truncated";
      if (!Charge(stack_.back())) return kTooLarge;
      memo_[n] = stack_.back();
      return "";
    case 'h':
    case 'j':  // BINGET, LONG_BINGET
      if (!Unsigned(op == 'h' ? 1 : 4, &n) || !memo_.count(n)) return "bad memo reference";
      if (!Charge(memo_[n])) return kTooLarge;
      stack_.push_back(memo_[n]);
      return "";
    default:
      *known = false;
      return "";
  }
}

std::string Unpickler::Structure(uint8_t op, bool* known) {
  std::string key;
  std::vector<json> items;
  switch (op) {
    case 's':  // SETITEM
      if (stack_.size() < 3 || !stack_[stack_.size() - 3].is_object())
        return "SETITEM without a dict";
      if (!Key(stack_[stack_.size() - 2], &key)) return kTooLarge;
      stack_[stack_.size() - 3][key] = std::move(stack_.back());
      stack_.resize(stack_.size() - 2);
      return "";
    case 'u':  // SETITEMS
      if (!PopMark(&items) || items.size() % 2 != 0 || stack_.empty() ||
          !stack_.back().is_object()) {
        return "SETITEMS without a dict";
      }
      for (size_t i = 0; i < items.size(); i += 2) {
        if (!Key(items[i], &key)) return kTooLarge;
        stack_.back()[key] = std::move(items[i + 1]);
      }
      return "";
    case 'a':  // APPEND
      if (stack_.size() < 2 || !stack_[stack_.size() - 2].is_array())
        return "APPEND without a list";
      stack_[stack_.size() - 2].push_back(std::move(stack_.back()));
      stack_.pop_back();
      return "";
    case 'e':  // APPENDS
      if (!PopMark(&items) || stack_.empty() || !stack_.back().is_array())
        return "APPENDS without a list";
      for (json& item : items) stack_.back().push_back(std::move(item));
      return "";
    case '.':  // STOP
      done_ = true;
      return "";
    default:
      *known = false;
      return "";
  }
}

std::string Unpickler::Step(uint8_t op) {
  bool known = true;
  std::string error = Constant(op, &known);
  if (!known) {
    known = true;
    error = Scalar(op, &known);
  }
  if (!known) {
    known = true;
    error = Memo(op, &known);
  }
  if (!known) {
    known = true;
    error = Structure(op, &known);
  }
  if (known) return error;
  char name[8];
  std::snprintf(name, sizeof(name), "0x%02x", op);
  return std::string("unsupported pickle opcode ") + name;
}

std::string Unpickler::Run(json* value) {
  while (!done_) {
    if (pos_ >= bytes_.size()) return "pickle ends without STOP";
    const auto op = static_cast<uint8_t>(bytes_[pos_++]);
    if (std::string error = Step(op); !error.empty()) {
      return error + " at byte " + std::to_string(pos_ - 1);
    }
  }
  if (stack_.size() != 1) return "pickle leaves " + std::to_string(stack_.size()) + " values";
  *value = std::move(stack_.back());
  return "";
}

}  // namespace

absl::Status ReadPickle(std::string_view bytes, json* value) {
  const std::string error = Unpickler(bytes).Run(value);
  return error.empty() ? absl::OkStatus() : absl::InvalidArgumentError(error);
}

}  // namespace spheret::train
