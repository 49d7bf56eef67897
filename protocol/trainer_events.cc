#include "protocol/trainer_events.h"

#include <cmath>
#include <limits>
#include <regex>
#include <utility>

namespace spheret::protocol {
namespace {

using nlohmann::json;

json Number(double value) { return std::isfinite(value) ? json(value) : json(nullptr); }

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
  // A number, or null for a value that was not finite (read as NaN). Absent when `optional`.
  void Real(const char* key, double* out, bool optional = false) {
    const json* value = Find(key, optional);
    if (value == nullptr) {
      if (optional) *out = std::numeric_limits<double>::quiet_NaN();
      return;
    }
    if (value->is_null()) {
      *out = std::numeric_limits<double>::quiet_NaN();
    } else if (value->is_number()) {
      *out = value->get<double>();
    } else {
      Fail(key, "a number or null", *value);
    }
  }
  void Text(const char* key, std::string* out, bool optional = false) {
    const json* value = Find(key, optional);
    if (value == nullptr) return;
    if (!value->is_string()) return Fail(key, "a string", *value);
    *out = value->get<std::string>();
  }
  const std::string& error() const { return error_; }

 private:
  const json* Find(const char* key, bool optional = false) {
    if (!error_.empty()) return nullptr;
    auto found = object_.find(key);
    if (found != object_.end()) return &*found;
    if (!optional) error_ = type_ + " event: field '" + key + "' is missing";
    return nullptr;
  }
  void Fail(const char* key, const char* want, const json& got) {
    std::string shown = got.dump();
    if (shown.size() > 40) shown = shown.substr(0, 40) + "...";
    error_ = type_ + " event: field '" + key + "' must be " + want + ", got " + shown;
  }

  const json& object_;
  std::string type_;
  std::string error_;
};

template <typename Event>
std::string Read(Fields& fields, Event* out);

template <>
std::string Read(Fields& f, MetricEvent* e) {
  f.Int("step", &e->step);
  f.Text("name", &e->name);
  f.Real("value", &e->value);
  if (f.error().empty() && e->name.empty()) return "metric event: field 'name' is empty";
  return f.error();
}

template <>
std::string Read(Fields& f, DiagEvent* e) {
  f.Int("step", &e->step);
  f.Int("layer", &e->layer);
  f.Text("sublayer", &e->sublayer);
  f.Real("hidden_norm", &e->hidden_norm);
  f.Real("theta", &e->theta);
  f.Real("alpha", &e->alpha, /*optional=*/true);
  f.Real("radial", &e->radial, /*optional=*/true);
  if (!f.error().empty()) return f.error();
  // Both become Prometheus labels: keep their sets small.
  if (e->layer < 1 || e->layer > 4096) return "diag event: field 'layer' must be in [1, 4096]";
  if (e->sublayer != "attn" && e->sublayer != "mlp") {
    return "diag event: field 'sublayer' must be attn or mlp";
  }
  return "";
}

template <>
std::string Read(Fields& f, CheckpointEvent* e) {
  f.Int("step", &e->step);
  f.Text("path", &e->path);
  return f.error();
}

template <>
std::string Read(Fields& f, EvalEvent* e) {
  f.Int("step", &e->step);
  f.Text("task", &e->task);
  f.Text("metric", &e->metric);
  f.Real("value", &e->value);
  f.Real("std_error", &e->std_error, /*optional=*/true);
  f.Text("error", &e->error, /*optional=*/true);
  return f.error();
}

template <>
std::string Read(Fields& f, DoneEvent* e) {
  f.Int("step", &e->step);
  f.Real("train_loss_avg", &e->train_loss_avg, /*optional=*/true);
  f.Real("val_loss", &e->val_loss, /*optional=*/true);
  f.Real("val_ppl", &e->val_ppl, /*optional=*/true);
  return f.error();
}

template <>
std::string Read(Fields& f, DivergedEvent* e) {
  f.Int("step", &e->step);
  f.Real("loss", &e->loss, /*optional=*/true);
  f.Real("bound", &e->bound, /*optional=*/true);
  return f.error();
}

template <>
std::string Read(Fields& f, StoppedEvent* e) {
  f.Int("step", &e->step);
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
    return {{"type", kDiagType},
            {"step", e.step},
            {"layer", e.layer},
            {"sublayer", e.sublayer},
            {"hidden_norm", Number(e.hidden_norm)},
            {"theta", Number(e.theta)},
            {"alpha", Number(e.alpha)},
            {"radial", Number(e.radial)}};
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

absl::Status ParseTrainerEvent(const std::string& line, TrainerEvent* event) {
  const std::string refused = Refusal(line, event);
  return refused.empty() ? absl::OkStatus() : absl::InvalidArgumentError(refused);
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

bool ParseDiagMetricName(const std::string& name, std::string* field, int64_t* layer,
                         std::string* sublayer) {
  static const std::regex kName("diag/([a-z_]{1,32})/([1-9][0-9]{0,3})/(attn|mlp)");
  std::smatch match;
  if (!std::regex_match(name, match, kName)) return false;
  const int64_t value = std::stoll(match[2].str());
  if (value > 4096) return false;
  *field = match[1].str();
  *layer = value;
  *sublayer = match[3].str();
  return true;
}

}  // namespace spheret::protocol
