// The trainer protocol: every event round-trips through its JSON line, non-finite numbers travel
// as null and come back as NaN with the step kept, and hostile lines are refused with a reason,
// never with an exception.
#include "protocol/trainer_events.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace spheret::protocol {
namespace {

TEST(TrainerEventsTest, OneTrainerProtocolEveryEventRoundTripsThroughItsLine) {
  const std::vector<TrainerEvent> events = {
      MetricEvent{7, kTrainLoss, 2.5},
      DiagEvent{8, 2, "mlp", 11.0, 0.25, 0.5, 0.01},
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
  ASSERT_EQ(
      ParseTrainerEvent(R"({"type":"diag","step":5,"layer":1,"sublayer":"attn","hidden_norm":null,)"
                        R"("theta":0.1,"alpha":null,"radial":null})",
                        &parsed),
      absl::OkStatus());
  const auto& diag = std::get<DiagEvent>(parsed);
  EXPECT_EQ(diag.step, 5);
  EXPECT_TRUE(std::isnan(diag.hidden_norm));
  EXPECT_TRUE(std::isnan(diag.alpha));
  EXPECT_EQ(diag.theta, 0.1);
}

// Issue 11, item 5: lines that aborted the worker's reader thread (`"name":7`) or the
// coordinator's writer (`"type":1`) are refused with a reason naming the field.
TEST(TrainerEventsTest, OneTrainerProtocolMalformedEventsAreRefusedWithAReasonNotAnException) {
  const std::vector<std::pair<std::string, std::string>> cases = {
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
       "diag event: field 'layer' must be in [1, 4096]"},
      {R"({"type":"diag","step":1,"layer":1,"sublayer":"x\"}","hidden_norm":1,"theta":0})",
       "diag event: field 'sublayer' must be attn or mlp"},
      {R"({"type":"checkpoint","step":3})", "checkpoint event: field 'path' is missing"},
      {R"({"type":"eval","step":3,"task":"piqa","metric":["acc"],"value":1})",
       "eval event: field 'metric' must be a string, got [\"acc\"]"},
  };
  for (const auto& [line, reason] : cases) {
    TrainerEvent event;
    EXPECT_EQ(ParseTrainerEvent(line, &event).message(), reason) << line;
  }
}

TEST(TrainerEventsTest, StepOfEventsWithAndWithoutOne) {
  EXPECT_EQ(StepOf(MetricEvent{9, "lr", 1e-3}), 9);
  EXPECT_EQ(StepOf(StoppedEvent{4}), 4);
  EXPECT_EQ(StepOf(ErrorEvent{"x"}), -1);
  EXPECT_EQ(StepOf(PreparedEvent{}), -1);
}

}  // namespace
}  // namespace spheret::protocol
