// Hostile sweep files (issue 28 items 1, 7, 10, 12 and the model-size cap): each is refused with a
// short message that names the limit, and none crashes or takes quadratic time.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "server/sweep/sweep_expand.h"
#include "server/sweep/sweep_spec.h"

namespace spheret {
namespace {

std::string Sweep(const std::string& base,
                  const std::string& parameters = "method: {values: [pre_ln]}") {
  return "name: s\ndataset: d\nbase: " + base + "\nparameters: {" + parameters + "}\n";
}

// The message of the refusal of `yaml`, checked to be InvalidArgument and short.
std::string Refusal(const std::string& yaml, size_t max_message = 600) {
  absl::StatusOr<SweepSpec> spec = ParseSweepSpec(yaml);
  EXPECT_FALSE(spec.ok());
  if (spec.ok()) return "";
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_LE(spec.status().message().size(), max_message) << spec.status().message().substr(0, 300);
  return std::string(spec.status().message());
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Item 1: std::regex_match recursed once per digit and overflowed the stack (SIGSEGV).
TEST(SweepLimitsTest, AHundredThousandDigitScalarIsRefusedNotACrash) {
  const std::string message = Refusal(Sweep("{max_iters: " + std::string(100'000, '1') + "}"));
  EXPECT_EQ(message,
            "line 3: a value of 100000 bytes, above the limit of 4096 (starts "
            "'1111111111111111... (100000 bytes)')");
}

TEST(SweepLimitsTest, AnIntegerOutOfRangeIsEchoedAsAPrefix) {
  const std::string message = Refusal(Sweep("{max_iters: " + std::string(4000, '9') + "}"));
  EXPECT_NE(message.find("max_iters: integer out of range: 99999"), std::string::npos) << message;
  EXPECT_NE(message.find("... (4000 bytes)"), std::string::npos) << message;
}

TEST(SweepLimitsTest, FileSizeDepthAndNodeCountHaveLimits) {
  EXPECT_EQ(Refusal(Sweep("{}") + "# " + std::string(1 << 20, 'x') + "\n"),
            "sweep file: 1048648 bytes, above the limit of 1048576 (it is stored whole): drop "
            "comments or split the sweep");
  std::string deep = "{a: " + std::string(40, '[') + "1" + std::string(40, ']') + "}";
  EXPECT_EQ(Refusal(Sweep(deep)), "line 3: nested more than 16 lists or mappings deep (the limit)");
  std::string many = "seeds: [0";
  for (int i = 1; i <= 250'000; ++i) many += ",0";
  EXPECT_EQ(Refusal(Sweep("{}") + many + "]\n"),
            "line 5: more than 250000 values, lists and mappings in the file (the limit)");
  // yaml-cpp's own guard used to answer this one, without saying what the limit is.
  const std::string flow(5000, '[');
  EXPECT_NE(Refusal("name: s\nx: " + flow + "\n").find("nested more than 16"), std::string::npos);
}

// Item 10: a 1.45 MB dataset string made every Acquire reply too large to arrive.
TEST(SweepLimitsTest, EveryStringKnobIsCappedNamingTheKnob) {
  const std::string long_text(2000, 'a');
  EXPECT_EQ(
      Refusal("name: s\ndataset: " + long_text + "\nparameters: {method: {values: [pre_ln]}}\n"),
      "line 2: dataset: a text of 2000 bytes, above the limit of 1024 (starts "
      "'aaaaaaaaaaaaaaaa... (2000 bytes)')");
  for (const std::string key : {"eval_data", "eval_tasks", "recipe", "method", "readout"}) {
    const std::string message = Refusal(Sweep("{" + key + ": " + long_text + "}"));
    EXPECT_EQ(
        message.rfind("line 3: " + key + ": a text of 2000 bytes, above the limit of 1024", 0), 0u)
        << message;
  }
  EXPECT_NE(Refusal("name: s\ndataset: d\neval: {tasks: [piqa], data: " + long_text +
                    "}\nparameters: {method: {values: [pre_ln]}}\n")
                .find("eval.data: a text of 2000 bytes"),
            std::string::npos);
}

// Item 12: every echo of the file's text is a bounded prefix.
TEST(SweepLimitsTest, EchoedKeysAndValuesAreBoundedPrefixes) {
  const std::string key(3000, 'k');
  // An explicit key ("? "): YAML allows implicit keys of at most 1024 characters.
  const std::string unknown = Refusal("name: s\ndataset: d\nbase:\n  ? " + key + "\n  : 1\n" +
                                          "parameters: {method: {values: [pre_ln]}}\n",
                                      /*max_message=*/1200);  // it lists the valid keys
  EXPECT_NE(unknown.find("... (3000 bytes)"), std::string::npos) << unknown;
  EXPECT_NE(Refusal("name: s\ndataset: d\nmetric: {goal: " + std::string(1000, 'g') +
                    "}\nparameters: {method: {values: [pre_ln]}}\n")
                .find("got gggg"),
            std::string::npos);
  EXPECT_NE(Refusal(Sweep("{method: " + std::string(1000, 'm') + "}")).find("method"),
            std::string::npos);
}

std::string LongAxis(const std::string& key, int values) {
  std::string list;
  for (int i = 1; i <= values; ++i) list += (i > 1 ? "," : "") + std::to_string(i);
  return key + ": {values: [" + list + "]}";
}

// Item 7: the duplicate checks were quadratic (87 s for 200,000 values); now hashed. 100,000
// values (below the node limit) parse in well under the bound on any machine.
TEST(SweepLimitsTest, LongAxesAndSeedListsParseInLinearTime) {
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<SweepSpec> spec = ParseSweepSpec(Sweep("{}", LongAxis("max_iters", 100'000)));
  ASSERT_TRUE(spec.ok()) << spec.status();
  std::string seeds = "seeds: [1";
  for (int i = 2; i <= 100'000; ++i) seeds += "," + std::to_string(i);
  absl::StatusOr<SweepSpec> seeded = ParseSweepSpec(Sweep("{}") + seeds + "]\n");
  ASSERT_TRUE(seeded.ok()) << seeded.status();
  EXPECT_LT(SecondsSince(start), 20.0);
  EXPECT_EQ(Refusal(Sweep("{}", "max_iters: {values: [1, 2, 1]}")),
            "line 4: parameters.max_iters.values: lists 1 twice");
  // The grid is counted before any trial is built or checked.
  SweepLimits limits;
  limits.max_trials = 1000;
  absl::StatusOr<std::vector<TrialSpec>> trials = ExpandSweep(*spec, limits);
  ASSERT_FALSE(trials.ok());
  EXPECT_EQ(trials.status().message(),
            "parameters: the grid has at least 1001 trials, above the limit of 1000");
}

TEST(SweepLimitsTest, ExpansionStopsWhenInterrupted) {
  absl::StatusOr<SweepSpec> spec = ParseSweepSpec(Sweep("{}", LongAxis("max_iters", 5000)));
  ASSERT_TRUE(spec.ok()) << spec.status();
  int asked = 0;
  absl::StatusOr<std::vector<TrialSpec>> trials =
      ExpandSweep(*spec, {}, [&asked]() -> absl::Status {
        return ++asked > 3 ? absl::DeadlineExceededError("deadline passed") : absl::OkStatus();
      });
  ASSERT_FALSE(trials.ok());
  EXPECT_EQ(trials.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(asked, 4);
}

// n_layer 1024 x n_embd 65536 passed a dry run (about 786 TiB of fp32 training state).
TEST(SweepLimitsTest, ModelsLargerThanTheMemoryCapAreRefusedAndTheCapIsAdjustable) {
  absl::StatusOr<SweepSpec> spec =
      ParseSweepSpec(Sweep("{n_layer: 1024, n_head: 64, n_embd: 65536}"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<std::vector<TrialSpec>> trials = ExpandSweep(*spec);
  ASSERT_FALSE(trials.ok());
  const std::string message(trials.status().message());
  EXPECT_EQ(message.rfind("line 3: trial {", 0), 0u) << message;
  EXPECT_NE(message.find("has about 5.28e+13 parameters; its fp32 training state (weights, "
                         "gradients, AdamW moments: 16 bytes a parameter) is about "
                         "786482.1 GiB, above the limit of 80.0 GiB "
                         "(spheret-coordinator --max-model-gib)"),
            std::string::npos)
      << message;
  SweepLimits roomy;
  roomy.max_model_bytes = INT64_MAX;
  EXPECT_TRUE(ExpandSweep(*spec, roomy).ok());
  // A GPT-2-small-sized trial (~124M parameters, ~2 GiB) is well inside the default.
  absl::StatusOr<SweepSpec> small = ParseSweepSpec(Sweep("{n_layer: 12, n_embd: 768}"));
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_TRUE(ExpandSweep(*small).ok());
}

}  // namespace
}  // namespace spheret
