// Connection files sent with a sweep (server/sweep/connection_files.h): the file's bytes and
// hash become part of each scripted trial's config, and so of its identity.
#include "server/sweep/connection_files.h"

#include <gtest/gtest.h>

#include <string>

#include "absl/strings/escaping.h"
#include "base/sha256.h"
#include "config/connection_script.h"
#include "server/sweep/sweep_expand.h"
#include "server/sweep/sweep_spec.h"

namespace spheret {
namespace {

using nlohmann::json;

constexpr char kSweep[] = R"(name: own
dataset: fortunes
base: {scale: xs, max_iters: 10, warmup_iters: 1, lr_decay_iters: 10}
parameters:
  method: {values: [pre_ln, scripted]}
  connection: {values: [rezero.pt, sub/dyt.pt], only_for: {method: scripted}}
seeds: [1, 2]
)";

std::vector<TrialSpec> Expand(const ConnectionFiles& files, const char* yaml = kSweep) {
  absl::StatusOr<SweepSpec> spec = ParseSweepSpec(yaml);
  EXPECT_TRUE(spec.ok()) << spec.status();
  spec->connection_files = files;
  absl::StatusOr<std::vector<TrialSpec>> trials = ExpandSweep(*spec);
  EXPECT_TRUE(trials.ok()) << trials.status();
  return trials.ok() ? *trials : std::vector<TrialSpec>{};
}

TEST(ConnectionFilesTest, TheSweepNamesItsFilesOnce) {
  absl::StatusOr<SweepSpec> spec = ParseSweepSpec(kSweep);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(ConnectionNames(*spec), (std::vector<std::string>{"rezero.pt", "sub/dyt.pt"}));
}

TEST(ConnectionFilesTest, EachScriptedTrialCarriesItsFileAndHash) {
  const ConnectionFiles files = {{"rezero.pt", "rezero bytes"}, {"sub/dyt.pt", "dyt bytes"}};
  const std::vector<TrialSpec> trials = Expand(files);
  ASSERT_EQ(trials.size(), 6u);  // pre_ln x 2 seeds, 2 files x 2 seeds
  int scripted = 0;
  for (const TrialSpec& trial : trials) {
    const json config = json::parse(trial.config_json);
    if (config["method"] != "scripted") {
      EXPECT_FALSE(config.contains("connection_script")) << trial.config_json;
      continue;
    }
    ++scripted;
    const std::string& bytes = files.at(config["connection"].get<std::string>());
    EXPECT_EQ(config["connection_sha256"], Sha256Hex(bytes));
    std::string decoded;
    ASSERT_TRUE(absl::Base64Unescape(config["connection_script"].get<std::string>(), &decoded));
    EXPECT_EQ(decoded, bytes);
    EXPECT_EQ(trial.trial_key, Sha256Hex(trial.config_json));
  }
  EXPECT_EQ(scripted, 4);
}

TEST(ConnectionFilesTest, AChangedFileMakesNewTrialsAndKeepsTheOthers) {
  const std::vector<TrialSpec> before = Expand({{"rezero.pt", "v1"}, {"sub/dyt.pt", "dyt"}});
  const std::vector<TrialSpec> after = Expand({{"rezero.pt", "v2"}, {"sub/dyt.pt", "dyt"}});
  ASSERT_EQ(before.size(), after.size());
  int changed = 0;
  for (size_t i = 0; i < before.size(); ++i) {
    const bool rezero = json::parse(before[i].config_json).value("connection", "") == "rezero.pt";
    EXPECT_EQ(before[i].trial_key != after[i].trial_key, rezero) << before[i].config_json;
    changed += rezero;
  }
  EXPECT_EQ(changed, 2);
}

TEST(ConnectionFilesTest, AFileNotSentIsRefusedUnlessTheSweepGivesItsHash) {
  absl::StatusOr<SweepSpec> spec = ParseSweepSpec(kSweep);
  ASSERT_TRUE(spec.ok());
  spec->connection_files = {{"rezero.pt", "bytes"}};
  absl::StatusOr<std::vector<TrialSpec>> trials = ExpandSweep(*spec);
  ASSERT_FALSE(trials.ok());
  EXPECT_NE(trials.status().message().find("'sub/dyt.pt' was not sent with the sweep"),
            std::string::npos)
      << trials.status();
  // Under the workers' --data-root, named with its hash: the trainer checks the file.
  json config = {{"method", "scripted"},
                 {"connection", "dyt.pt"},
                 {"connection_sha256", std::string(64, 'a')}};
  EXPECT_TRUE(AttachConnection({}, &config).ok());
  EXPECT_FALSE(config.contains("connection_script"));
  // A hash that is not the sent file's is refused naming both.
  EXPECT_NE(AttachConnection({{"dyt.pt", "x"}}, &config).message().find(Sha256Hex("x")),
            std::string::npos);
}

TEST(ConnectionFilesTest, TheLimitsAreKept) {
  ConnectionFiles many;
  for (size_t i = 0; i <= kMaxConnectionFiles; ++i) many["f" + std::to_string(i)] = "x";
  EXPECT_NE(CheckConnectionFiles(many).message().find("above the limit of 8"), std::string::npos);
  const std::string big(kMaxConnectionScriptBytes + 1, 'x');
  EXPECT_NE(CheckConnectionFiles({{"big.pt", big}}).message().find("big.pt"), std::string::npos);
  EXPECT_TRUE(CheckConnectionFiles({{"ok.pt", "x"}}).ok());
}

TEST(ConnectionFilesTest, ASweepMayNotSetTheScriptItself) {
  absl::StatusOr<SweepSpec> spec = ParseSweepSpec(R"(name: own
dataset: fortunes
base: {connection: a.pt, connection_script: QUJD}
parameters:
  method: {values: [scripted]}
)");
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.status().message().find("connection_script"), std::string::npos) << spec.status();
}

}  // namespace
}  // namespace spheret
