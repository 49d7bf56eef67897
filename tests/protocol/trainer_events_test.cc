// The trainer protocol: every event round-trips through its JSON line, non-finite numbers travel
// as null and come back as NaN with the step kept, and hostile lines are refused with a reason,
// never with an exception.
#include "protocol/trainer_events.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace spheret::protocol {
namespace {

TEST(TrainerEventsTest, OneTrainerProtocolEveryEventRoundTripsThroughItsLine) {
  const std::vector<TrainerEvent> events = {
      MetricEvent{7, kTrainLoss, 2.5},
      DiagEvent{8, 2, "mlp", {{"alpha", 0.5}, {"hidden_norm", 11.0}, {"radial", 0.01}}},
      DiagEvent{8, 0, "model", {{"delta_sum", 0.75}}},
      DiagEvent{8, 3, "dyadic", {{"theta2_budget", 0.02}}},
      CheckpointEvent{10, "runs/x/ckpt.pt"},
      EvalEvent{10, "piqa", "acc_norm", 0.61, 0.011},
      EvalEvent{10, "*", kEvalErrorMetric, std::nan(""), std::nan(""), "no data for task piqa"},
      DoneEvent{10, 2.4, 2.5, std::exp(2.5)},
      DivergedEvent{3, 1e9, 100.0},
      StoppedEvent{4},
      PreparedEvent{"data/x", 3, 1000, 100},
      ErrorEvent{"config key 'n_head' must be in [1, 1024], got 0"},
  };
  for (const TrainerEvent& event : events) {
    const std::string line = ToJson(event).dump();
    TrainerEvent parsed;
    ASSERT_EQ(ParseTrainerEvent(line, &parsed), absl::OkStatus()) << line;
    EXPECT_EQ(parsed.index(), event.index()) << line;
    EXPECT_EQ(ToJson(parsed).dump(), line);
  }
}

TEST(TrainerEventsTest, NonFiniteNumbersTravelAsNullAndComeBackAsNaNWithTheStep) {
  const double inf = std::numeric_limits<double>::infinity();
  const std::string line = ToJson(MetricEvent{12, kTrainLoss, inf}).dump();
  EXPECT_EQ(line, R"({"name":"train/loss","step":12,"type":"metric","value":null})");
  TrainerEvent parsed;
  ASSERT_EQ(ParseTrainerEvent(line, &parsed), absl::OkStatus());
  const auto& metric = std::get<MetricEvent>(parsed);
  EXPECT_EQ(metric.step, 12);
  EXPECT_TRUE(std::isnan(metric.value));
}

// One typed road for per-layer data: a diag event carries any number of named values (up to 64),
// non-finite ones as null, and comes back with every name and value.
TEST(TrainerEventsTest, DiagEventsRoundTripManyFieldsWithNulls) {
  DiagEvent event{42, 7, "mlp", {}};
  for (int i = 0; i < 64; ++i) {
    event.values.emplace_back("field_" + std::to_string(i), i % 5 == 0 ? std::nan("") : 0.5 * i);
  }
  event.values.emplace_back("at_cap", std::numeric_limits<double>::infinity());
  event.values.erase(event.values.begin());  // 64 in all
  const std::string line = ToJson(event).dump();
  EXPECT_NE(line.find(R"("values":{"at_cap":null,)"), std::string::npos) << line;
  TrainerEvent parsed;
  ASSERT_EQ(ParseTrainerEvent(line, &parsed), absl::OkStatus()) << line;
  const auto& diag = std::get<DiagEvent>(parsed);
  EXPECT_EQ(diag.step, 42);
  EXPECT_EQ(diag.layer, 7);
  EXPECT_EQ(diag.sublayer, "mlp");
  ASSERT_EQ(diag.values.size(), 64u);
  std::map<std::string, double> read(diag.values.begin(), diag.values.end());
  for (const auto& [name, value] : event.values) {
    ASSERT_EQ(read.count(name), 1u) << name;
    if (std::isfinite(value)) {
      EXPECT_EQ(read[name], value) << name;
    } else {
      EXPECT_TRUE(std::isnan(read[name])) << name;
    }
  }
}

// events.jsonl files written before the typed values still read: the flat fields become values,
// a null alpha (a method without a step size) becomes no value, other nulls NaN.
TEST(TrainerEventsTest, DiagEventsOfTheOldFlatFormStillRead) {
  TrainerEvent parsed;
  ASSERT_EQ(
      ParseTrainerEvent(R"({"type":"diag","step":5,"layer":1,"sublayer":"attn","hidden_norm":null,)"
                        R"("theta":0.1,"alpha":null,"radial":0.25})",
                        &parsed),
      absl::OkStatus());
  const auto& diag = std::get<DiagEvent>(parsed);
  EXPECT_EQ(diag.step, 5);
  ASSERT_EQ(diag.values.size(), 3u);
  EXPECT_EQ(diag.values[0].first, "hidden_norm");
  EXPECT_TRUE(std::isnan(diag.values[0].second));
  EXPECT_EQ(diag.values[1], (std::pair<std::string, double>{"theta", 0.1}));
  EXPECT_EQ(diag.values[2], (std::pair<std::string, double>{"radial", 0.25}));
  ASSERT_EQ(
      ParseTrainerEvent(R"({"type":"diag","step":5,"layer":2,"sublayer":"mlp","hidden_norm":11.3,)"
                        R"("theta":0.2,"alpha":0.5,"radial":0.1})",
                        &parsed),
      absl::OkStatus());
  EXPECT_EQ(std::get<DiagEvent>(parsed).values.size(), 4u);
  EXPECT_EQ(ToJson(parsed).dump(),
            R"({"layer":2,"step":5,"sublayer":"mlp","type":"diag","values":{"alpha":0.5,)"
            R"("hidden_norm":11.3,"radial":0.1,"theta":0.2}})");
}

// Issue 11, item 5: lines that aborted the worker's reader thread (`"name":7`) or the
// coordinator's writer (`"type":1`) are refused with a reason naming the field.
const std::pair<const char*, const char*> kMalformedLines[] = {
    {R"({"type":"metric","name":7})", "metric event: field 'step' is missing"},
    {R"({"type":"metric","step":1,"name":7,"value":1})",
     "metric event: field 'name' must be a string, got 7"},
    {R"({"type":"metric","step":1.5,"name":"x","value":1})",
     "metric event: field 'step' must be an integer, got 1.5"},
    {R"({"type":"metric","step":1,"name":"","value":1})", "metric event: field 'name' is empty"},
    {R"({"type":"metric","step":1,"name":"x","value":"high"})",
     "metric event: field 'value' must be a number or null, got \"high\""},
    {R"({"type":1})", "field 'type' must be a string, got 1"},
    {R"({"type":"party"})", "unknown event type 'party'"},
    {R"({"step":1})", "no 'type' field"},
    {R"([1,2])", "not a JSON object"},
    {"step 10: val loss 2.5", "not a JSON line"},
    {"", "not a JSON line"},
    {R"({"type":"diag","step":1,"layer":0,"sublayer":"attn","hidden_norm":1,"theta":0})",
     "diag event: field 'layer' must be in [1, 4096] for sublayer attn, got 0"},
    {R"({"type":"diag","step":1,"layer":1,"sublayer":"x\"}","hidden_norm":1,"theta":0})",
     "diag event: field 'sublayer' must be attn, mlp, model or dyadic, got \"x\\x22}\""},
    {R"({"type":"diag","step":1,"layer":4097,"sublayer":"mlp","values":{"theta":0}})",
     "diag event: field 'layer' must be in [1, 4096] for sublayer mlp, got 4097"},
    {R"({"type":"diag","step":1,"layer":1,"sublayer":"model","values":{"delta_sum":0}})",
     "diag event: field 'layer' must be 0 for sublayer model, got 1"},
    {R"({"type":"diag","step":1,"layer":0,"sublayer":"dyadic","values":{"theta2_budget":0}})",
     "diag event: field 'layer' must be in [1, 8192] for sublayer dyadic, got 0"},
    {R"({"type":"diag","step":1,"layer":1,"sublayer":"attn","values":{"Theta":0}})",
     "diag event: field 'values' has a field name that is not 1 to 40 of [a-z0-9_]: "
     "\"Theta\""},
    {R"({"type":"diag","step":1,"layer":1,"sublayer":"attn","values":{"diag/theta/1/attn":0}})",
     "diag event: field 'values' has a field name that is not 1 to 40 of [a-z0-9_]: "
     "\"diag/theta/1/attn\""},
    {R"({"type":"diag","step":1,"layer":1,"sublayer":"attn","values":{"":0}})",
     "diag event: field 'values' has a field name that is not 1 to 40 of [a-z0-9_]: \"\""},
    {R"({"type":"diag","step":1,"layer":1,"sublayer":"attn","values":{"theta":"wide"}})",
     "diag event: field 'values.theta' must be a number or null, got \"wide\""},
    {R"({"type":"diag","step":1,"layer":1,"sublayer":"attn","values":[1,2]})",
     "diag event: field 'values' must be an object, got [1,2]"},
    {R"({"type":"diag","step":1,"layer":1,"sublayer":"attn"})",
     "diag event: field 'values' is missing"},
    {R"({"type":"diag","step":1,"layer":1,"sublayer":"attn","hidden_norm":1,"theta":"x"})",
     "diag event: field 'theta' must be a number or null, got \"x\""},
    {R"({"type":"checkpoint","step":3})", "checkpoint event: field 'path' is missing"},
    {R"({"type":"eval","step":3,"task":"piqa","metric":["acc"],"value":1})",
     "eval event: field 'metric' must be a string, got [\"acc\"]"},
};

TEST(TrainerEventsTest, OneTrainerProtocolMalformedEventsAreRefusedWithAReasonNotAnException) {
  for (const auto& [line, reason] : kMalformedLines) {
    TrainerEvent event;
    EXPECT_EQ(ParseTrainerEvent(line, &event).message(), reason) << line;
  }
}

TEST(TrainerEventsTest, DiagEventsWithTooManyOrLongFieldNamesAreRefused) {
  std::string many = R"({"type":"diag","step":1,"layer":1,"sublayer":"attn","values":{)";
  for (int i = 0; i < 65; ++i) many += (i ? ",\"f" : "\"f") + std::to_string(i) + "\":1";
  many += "}}";
  TrainerEvent event;
  EXPECT_EQ(ParseTrainerEvent(many, &event).message(),
            "diag event: field 'values' has 65 fields, at most 64");
  const std::string long_name(41, 'a');
  EXPECT_EQ(ParseTrainerEvent(R"({"type":"diag","step":1,"layer":1,"sublayer":"attn","values":{")" +
                                  long_name + R"(":1}})",
                              &event)
                .message(),
            "diag event: field 'values' has a field name that is not 1 to 40 of [a-z0-9_]: \"" +
                long_name.substr(0, 40) + "...\"");
  EXPECT_TRUE(
      ParseTrainerEvent(R"({"type":"diag","step":1,"layer":1,"sublayer":"attn","values":{")" +
                            long_name.substr(1) + R"(":1}})",
                        &event)
          .ok());
}

// Issue 44, item 13: steps of +-2^63 were taken (2^63 itself wrapped to -2^63). A step is an
// integer in [0, 2^53], in every event that has one.
TEST(TrainerEventsTest, HostileInputStepsOutsideZeroToTwoToThe53AreRefused) {
  for (const std::string step :
       {"9223372036854775807", "9223372036854775808", "18446744073709551615",
        "-9223372036854775808", "-1", "9007199254740993"}) {
    for (const std::string& rest :
         {std::string(R"("type":"metric","name":"train/loss","value":1)"),
          std::string(R"("type":"checkpoint","path":"ckpt.pt")"),
          std::string(R"("type":"diag","layer":1,"sublayer":"attn","values":{"theta":0})"),
          std::string(R"("type":"stopped")")}) {
      const std::string line = "{" + rest + R"(,"step":)" + step + "}";
      TrainerEvent event;
      const std::string type = rest.substr(8, rest.find('"', 8) - 8);
      EXPECT_EQ(ParseTrainerEvent(line, &event).message(),
                type +
                    " event: field 'step' must be an integer in [0, 9007199254740992] (2^53), "
                    "got " +
                    step)
          << line;
    }
  }
  for (const std::string step : {"0", "9007199254740992"}) {
    TrainerEvent event;
    ASSERT_TRUE(ParseTrainerEvent(R"({"type":"stopped","step":)" + step + "}", &event).ok());
    EXPECT_EQ(std::to_string(StepOf(event)), step);
  }
}

TEST(TrainerEventsTest, StepOfEventsWithAndWithoutOne) {
  EXPECT_EQ(StepOf(MetricEvent{9, "lr", 1e-3}), 9);
  EXPECT_EQ(StepOf(StoppedEvent{4}), 4);
  EXPECT_EQ(StepOf(ErrorEvent{"x"}), -1);
  EXPECT_EQ(StepOf(PreparedEvent{}), -1);
}

// Issue 28, item 2: a line over kMaxEventLineBytes is refused unread, naming its size and the
// limit (a 5 MiB line was parsed whole before), and Excerpt bounds what a message echoes without
// splitting a UTF-8 sequence.
TEST(TrainerEventsTest, HostileInputLongLinesAreRefusedAndExcerptsBounded) {
  TrainerEvent event;
  const std::string message(kMaxEventLineBytes, 'm');
  const absl::Status refused =
      ParseTrainerEvent(R"({"type":"error","message":")" + message + "\"}", &event);
  EXPECT_EQ(refused.message(), "a line of " + std::to_string(kMaxEventLineBytes + 29) +
                                   " bytes is over the limit of an event line (65536 bytes)");
  EXPECT_TRUE(ParseTrainerEvent(R"({"type":"error","message":")" +
                                    message.substr(0, kMaxEventLineBytes - 29) + "\"}",
                                &event)
                  .ok());
  EXPECT_EQ(Excerpt("short", 5), "short");
  EXPECT_EQ(Excerpt("abcdef", 3), "abc... (6 bytes)");
  EXPECT_EQ(Excerpt("ab\xc3\xa9z", 3), "ab... (5 bytes)") << "the cut does not split the e-acute";
  EXPECT_EQ(Excerpt("ab\xc3\xa9z", 4), "ab\xc3\xa9... (5 bytes)");
}

}  // namespace
}  // namespace spheret::protocol
