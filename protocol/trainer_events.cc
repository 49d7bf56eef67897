#include "protocol/trainer_events.h"

#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace spheret::protocol {
namespace {

using nlohmann::json;

json Number(double value) { return std::isfinite(value) ? json(value) : json(nullptr); }

// A JSON value for a message: its text, cut at 40 characters.
std::string Shown(const json& value) {
  std::string shown = value.dump();
  if (shown.size() > 40) shown = shown.substr(0, 40) + "...";
  return shown;
}

constexpr char kStepRange[] = "an integer in [0, 9007199254740992] (2^53)";

// A number, or null for one that was not finite (read as NaN); false for anything else.
bool ReadNumber(const json& value, double* out) {
  if (value.is_null()) {
    *out = std::numeric_limits<double>::quiet_NaN();
  } else if (value.is_number()) {
    *out = value.get<double>();
  } else {
    return false;
  }
  return true;
}

// Reads the fields of one event object; the first problem is kept in error() and every later read
// is a no-op, so a parser reads straight through and checks once.
class Fields {
 public:
  Fields(const json& object, std::string type) : object_(object), type_(std::move(type)) {}

  void Int(const char* key, int64_t* out) {
    const json* value = Find(key);
    if (value == nullptr) return;
    if (!value->is_number_integer()) return Fail(key, "an integer", *value);
    *out = value->get<int64_t>();
  }
  // The event's step: an integer in [0, kMaxStep] (2^63 reads as an unsigned JSON number).
  void Step(int64_t* out) {
    const json* value = Find("step");
    if (value == nullptr) return;
    if (!value->is_number_integer()) return Fail("step", "an integer", *value);
    const bool in_range = value->is_number_unsigned()
                              ? value->get<uint64_t>() <= static_cast<uint64_t>(kMaxStep)
                              : StepRangeError(value->get<int64_t>()).empty();
    if (!in_range) return Fail("step", kStepRange, *value);
    *out = value->get<int64_t>();
  }
  // A number, or null for a value that was not finite (read as NaN). Absent when `optional`.
  void Real(const char* key, double* out, bool optional = false) {
    const json* value = Find(key, optional);
    if (value == nullptr) {
      if (optional) *out = std::numeric_limits<double>::quiet_NaN();
      return;
    }
    if (!ReadNumber(*value, out)) Fail(key, "a number or null", *value);
  }
  void Text(const char* key, std::string* out, bool optional = false) {
    const json* value = Find(key, optional);
    if (value == nullptr) return;
    if (!value->is_string()) return Fail(key, "a string", *value);
    *out = value->get<std::string>();
  }
  const std::string& error() const { return error_; }
  const json& object() const { return object_; }

 private:
  const json* Find(const char* key, bool optional = false) {
    if (!error_.empty()) return nullptr;
    auto found = object_.find(key);
    if (found != object_.end()) return &*found;
    if (!optional) error_ = type_ + " event: field '" + key + "' is missing";
    return nullptr;
  }
  void Fail(const char* key, const char* want, const json& got) {
    error_ = type_ + " event: field '" + key + "' must be " + want + ", got " + Shown(got);
  }

  const json& object_;
  std::string type_;
  std::string error_;
};

template <typename Event>
std::string Read(Fields& fields, Event* out);

template <>
std::string Read(Fields& f, MetricEvent* e) {
  f.Step(&e->step);
  f.Text("name", &e->name);
  f.Real("value", &e->value);
  if (f.error().empty() && e->name.empty()) return "metric event: field 'name' is empty";
  return f.error();
}

// The values object of a diag event. A bad field name is left for DiagRowError to name.
std::string ReadDiagValues(const json& values, DiagValues* out) {
  if (!values.is_object()) return "field 'values' must be an object, got " + Shown(values);
  if (values.size() > kMaxDiagValues) {
    return "field 'values' has " + std::to_string(values.size()) + " fields, at most " +
           std::to_string(kMaxDiagValues);
  }
  for (auto it = values.begin(); it != values.end(); ++it) {
    double number = 0;
    if (IsDiagFieldName(it.key()) && !ReadNumber(it.value(), &number)) {
      return "field 'values." + it.key() + "' must be a number or null, got " + Shown(it.value());
    }
    out->emplace_back(it.key(), number);
  }
  return "";
}

// The flat form of earlier trainers: hidden_norm and theta, with alpha (null: the method has no
// step size, so no value) and radial, as top-level keys.
std::string ReadFlatDiagValues(const json& object, DiagValues* out) {
  if (!object.contains("hidden_norm")) return "field 'values' is missing";
  for (const char* key : {"hidden_norm", "theta", "alpha", "radial"}) {
    auto found = object.find(key);
    if (found == object.end()) continue;
    double number = 0;
    if (!ReadNumber(*found, &number)) {
      return std::string("field '") + key + "' must be a number or null, got " + Shown(*found);
    }
    if (found->is_null() && std::string(key) == "alpha") continue;
    out->emplace_back(key, number);
  }
  return "";
}

template <>
std::string Read(Fields& f, DiagEvent* e) {
  f.Step(&e->step);
  f.Int("layer", &e->layer);
  f.Text("sublayer", &e->sublayer);
  if (!f.error().empty()) return f.error();
  auto values = f.object().find("values");
  std::string error = values != f.object().end() ? ReadDiagValues(*values, &e->values)
                                                 : ReadFlatDiagValues(f.object(), &e->values);
  if (error.empty()) error = DiagRowError(e->layer, e->sublayer, e->values);
  return error.empty() ? "" : "diag event: " + error;
}

template <>
std::string Read(Fields& f, CheckpointEvent* e) {
  f.Step(&e->step);
  f.Text("path", &e->path);
  return f.error();
}

template <>
std::string Read(Fields& f, EvalEvent* e) {
  f.Step(&e->step);
  f.Text("task", &e->task);
  f.Text("metric", &e->metric);
  f.Real("value", &e->value);
  f.Real("std_error", &e->std_error, /*optional=*/true);
  f.Text("error", &e->error, /*optional=*/true);
  return f.error();
}

template <>
std::string Read(Fields& f, DoneEvent* e) {
  f.Step(&e->step);
  f.Real("train_loss_avg", &e->train_loss_avg, /*optional=*/true);
  f.Real("val_loss", &e->val_loss, /*optional=*/true);
  f.Real("val_ppl", &e->val_ppl, /*optional=*/true);
  return f.error();
}

template <>
std::string Read(Fields& f, DivergedEvent* e) {
  f.Step(&e->step);
  f.Real("loss", &e->loss, /*optional=*/true);
  f.Real("bound", &e->bound, /*optional=*/true);
  return f.error();
}

template <>
std::string Read(Fields& f, StoppedEvent* e) {
  f.Step(&e->step);
  return f.error();
}

template <>
std::string Read(Fields& f, PreparedEvent* e) {
  f.Text("path", &e->path);
  f.Int("files", &e->files);
  f.Int("train_tokens", &e->train_tokens);
  f.Int("val_tokens", &e->val_tokens);
  return f.error();
}

template <>
std::string Read(Fields& f, ErrorEvent* e) {
  f.Text("message", &e->message);
  return f.error();
}

template <typename Event>
std::string ReadInto(const json& object, const std::string& type, TrainerEvent* out) {
  Fields fields(object, type);
  Event event;
  if (std::string error = Read(fields, &event); !error.empty()) return error;
  *out = std::move(event);
  return "";
}

struct ToJsonVisitor {
  json operator()(const MetricEvent& e) const {
    return {{"type", kMetricType}, {"step", e.step}, {"name", e.name}, {"value", Number(e.value)}};
  }
  json operator()(const DiagEvent& e) const {
    json values = json::object();
    for (const auto& [name, value] : e.values) values[name] = Number(value);
    return {{"type", kDiagType},
            {"step", e.step},
            {"layer", e.layer},
            {"sublayer", e.sublayer},
            {"values", std::move(values)}};
  }
  json operator()(const CheckpointEvent& e) const {
    return {{"type", kCheckpointType}, {"step", e.step}, {"path", e.path}};
  }
  json operator()(const EvalEvent& e) const {
    json out = {{"type", kEvalType},        {"step", e.step},
                {"task", e.task},           {"metric", e.metric},
                {"value", Number(e.value)}, {"std_error", Number(e.std_error)}};
    if (!e.error.empty()) out["error"] = e.error;
    return out;
  }
  json operator()(const DoneEvent& e) const {
    return {{"type", kDoneType},
            {"step", e.step},
            {"train_loss_avg", Number(e.train_loss_avg)},
            {"val_loss", Number(e.val_loss)},
            {"val_ppl", Number(e.val_ppl)}};
  }
  json operator()(const DivergedEvent& e) const {
    return {{"type", kDivergedType},
            {"step", e.step},
            {"loss", Number(e.loss)},
            {"bound", Number(e.bound)}};
  }
  json operator()(const StoppedEvent& e) const {
    return {{"type", kStoppedType}, {"step", e.step}};
  }
  json operator()(const PreparedEvent& e) const {
    return {{"type", kPreparedType},
            {"path", e.path},
            {"files", e.files},
            {"train_tokens", e.train_tokens},
            {"val_tokens", e.val_tokens}};
  }
  json operator()(const ErrorEvent& e) const {
    return {{"type", kErrorType}, {"message", e.message}};
  }
};

}  // namespace

json ToJson(const TrainerEvent& event) { return std::visit(ToJsonVisitor{}, event); }

namespace {

// Why `line` is not a trainer event ("" when it is one, parsed into *event).
std::string Refusal(const std::string& line, TrainerEvent* event) {
  const json object = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (object.is_discarded()) return "not a JSON line";
  if (!object.is_object()) return "not a JSON object";
  auto type = object.find("type");
  if (type == object.end()) return "no 'type' field";
  if (!type->is_string()) return "field 'type' must be a string, got " + type->dump();
  const std::string name = type->get<std::string>();
  using Reader = std::string (*)(const json&, const std::string&, TrainerEvent*);
  static const std::pair<const char*, Reader> kReaders[] = {
      {kMetricType, ReadInto<MetricEvent>},
      {kDiagType, ReadInto<DiagEvent>},
      {kCheckpointType, ReadInto<CheckpointEvent>},
      {kEvalType, ReadInto<EvalEvent>},
      {kDoneType, ReadInto<DoneEvent>},
      {kDivergedType, ReadInto<DivergedEvent>},
      {kStoppedType, ReadInto<StoppedEvent>},
      {kPreparedType, ReadInto<PreparedEvent>},
      {kErrorType, ReadInto<ErrorEvent>},
  };
  for (const auto& [type_name, reader] : kReaders) {
    if (name == type_name) return reader(object, name, event);
  }
  std::string shown = name.size() > 40 ? name.substr(0, 40) + "..." : name;
  return "unknown event type '" + shown + "'";
}

}  // namespace

absl::Status LineTooLong(size_t line_bytes) {
  return absl::InvalidArgumentError(absl::StrCat("a line of ", line_bytes,
                                                 " bytes is over the limit of an event line (",
                                                 kMaxEventLineBytes, " bytes)"));
}

std::string StepRangeError(int64_t step) {
  if (step >= 0 && step <= kMaxStep) return "";
  return absl::StrCat("step ", step, " is outside [0, ", kMaxStep, "] (2^53)");
}

absl::Status ParseTrainerEvent(const std::string& line, TrainerEvent* event) {
  if (line.size() > kMaxEventLineBytes) return LineTooLong(line.size());
  const std::string refused = Refusal(line, event);
  return refused.empty() ? absl::OkStatus() : absl::InvalidArgumentError(refused);
}

std::string Excerpt(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  size_t cut = max_bytes;
  // Back off to the lead byte of a UTF-8 sequence the cut would split (continuation: 10xxxxxx).
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return absl::StrCat(absl::string_view(text.data(), cut), "... (", text.size(), " bytes)");
}

int64_t StepOf(const TrainerEvent& event) {
  return std::visit(
      [](const auto& e) -> int64_t {
        if constexpr (std::is_same_v<std::decay_t<decltype(e)>, PreparedEvent> ||
                      std::is_same_v<std::decay_t<decltype(e)>, ErrorEvent>) {
          return -1;
        } else {
          return e.step;
        }
      },
      event);
}

}  // namespace spheret::protocol
