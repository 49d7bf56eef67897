// The paper's settings as data: the `paper` recipe against the paper's Appendix B (Tables 6-7),
// linked sweep parameters, and the sweep files of examples/paper/ (each expands, with the
// paper's per-size settings stored in every trial's config).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "config/recipes.h"
#include "config/train_config.h"
#include "server/sweep/sweep_expand.h"
#include "server/sweep/sweep_spec.h"

namespace spheret {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The paper's Table 6 (model sizes and learning rates) and Table 7 (the shared settings), written
// out here from the paper, not from config/recipes.cc.
struct PaperSize {
  const char* scale;
  int64_t n_layer, n_head, n_embd;
  double learning_rate;
};
constexpr PaperSize kTable6[] = {
    {"S", 12, 12, 768, 6e-4}, {"M", 24, 16, 1024, 3e-4}, {"L", 36, 20, 1280, 2.5e-4}};

void ExpectTable7(const TrainConfig& c) {
  EXPECT_EQ(c.max_iters, 50000);
  EXPECT_EQ(c.lr_decay_iters, 50000);
  EXPECT_TRUE(c.decay_lr);
  EXPECT_EQ(c.warmup_iters, 2000);
  EXPECT_EQ(c.block_size, 1024);
  EXPECT_EQ(c.batch_size * c.gradient_accumulation_steps, 128) << "global batch: 128 sequences";
  EXPECT_EQ(c.block_size * c.batch_size * c.gradient_accumulation_steps, 131072)
      << "131,072 tokens per iteration";
  EXPECT_DOUBLE_EQ(c.beta1, 0.9);
  EXPECT_DOUBLE_EQ(c.beta2, 0.95);
  EXPECT_DOUBLE_EQ(c.weight_decay, 0.1);
  EXPECT_DOUBLE_EQ(c.grad_clip, 1.0);
  EXPECT_EQ(c.dtype, "bfloat16");
  EXPECT_EQ(c.vocab_size, 50304);
  EXPECT_EQ(c.seed, 1337);
}

TEST(PaperRecipeTest, EveryPresetValueIsThePapersTables6And7) {
  for (const PaperSize& size : kTable6) {
    SCOPED_TRACE(size.scale);
    TrainConfig config;
    ASSERT_EQ(ApplyConfigJson(json{{"recipe", "paper"}, {"scale", size.scale}, {"device", "cuda"}},
                              &config),
              absl::OkStatus());
    ASSERT_EQ(FinalizeConfig(&config), absl::OkStatus());
    EXPECT_EQ(config.n_layer, size.n_layer);
    EXPECT_EQ(config.n_head, size.n_head);
    EXPECT_EQ(config.n_embd, size.n_embd);
    EXPECT_DOUBLE_EQ(config.learning_rate, size.learning_rate);
    EXPECT_DOUBLE_EQ(config.min_lr, size.learning_rate / 10) << "min lr = lr / 10";
    ExpectTable7(config);
    EXPECT_EQ(ConfigToJson(config)["recipe"], "paper");
  }
}

TEST(PaperRecipeTest, ExplicitKeysWinOverTheRecipeInAnyOrder) {
  TrainConfig config;
  ASSERT_EQ(ApplyConfigOverride("max_iters=100", &config), absl::OkStatus());
  ASSERT_EQ(ApplyConfigJson(json{{"recipe", "paper"}, {"scale", "M"}, {"device", "cuda"}}, &config),
            absl::OkStatus());
  ASSERT_EQ(ApplyConfigOverride("learning_rate=1e-3", &config), absl::OkStatus());
  ASSERT_EQ(FinalizeConfig(&config), absl::OkStatus());
  EXPECT_EQ(config.max_iters, 100);
  EXPECT_DOUBLE_EQ(config.learning_rate, 1e-3);
  EXPECT_DOUBLE_EQ(config.min_lr, 3e-5) << "min_lr still the recipe's for M";
  EXPECT_EQ(config.warmup_iters, 2000);
  // A CPU size needs both per-size keys set: with them, the shared settings still apply.
  TrainConfig cpu;
  ASSERT_EQ(ApplyConfigJson(json{{"recipe", "paper"},
                                 {"scale", "xs"},
                                 {"dtype", "float32"},
                                 {"learning_rate", 1e-3},
                                 {"min_lr", 1e-4}},
                            &cpu),
            absl::OkStatus());
  ASSERT_EQ(FinalizeConfig(&cpu), absl::OkStatus());
  EXPECT_EQ(cpu.max_iters, 50000);
  TrainConfig missing;
  ASSERT_EQ(
      ApplyConfigJson(json{{"recipe", "paper"}, {"scale", "xs"}, {"dtype", "float32"}}, &missing),
      absl::OkStatus());
  EXPECT_NE(FinalizeConfig(&missing).message().find("scale \"xs\" needs them set explicitly"),
            std::string::npos);
}

TEST(LinkedParametersTest, MoveTogetherWithTheirAxis) {
  absl::StatusOr<SweepSpec> spec = ParseSweepSpec(R"(name: linked
dataset: fortunes
parameters:
  method: {values: [pre_ln, geonorm]}
  scale: {values: [xs, s-cpu], with: {learning_rate: [1e-3, 6e-4], min_lr: [1e-4, 6e-5]}}
  warmup_iters: {values: [5], only_for: {learning_rate: 1e-3}}
)");
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<std::vector<TrialSpec>> trials = ExpandSweep(*spec);
  ASSERT_TRUE(trials.ok()) << trials.status();
  ASSERT_EQ(trials->size(), 4u);
  std::map<std::string, std::pair<double, double>> lr_by_scale;
  for (const TrialSpec& trial : *trials) {
    const json config = json::parse(trial.config_json);
    const std::string scale = config.at("scale");
    lr_by_scale[scale] = {config.at("learning_rate"), config.at("min_lr")};
    EXPECT_EQ(config.contains("warmup_iters"), scale == "xs") << "only_for reads a linked key";
  }
  EXPECT_EQ(lr_by_scale["xs"], std::make_pair(1e-3, 1e-4));
  EXPECT_EQ(lr_by_scale["s-cpu"], std::make_pair(6e-4, 6e-5));
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

const fs::path kPaperDir = fs::path(SPHERET_SOURCE_DIR) / "examples" / "paper";

TEST(PaperSweepsTest, Table2ListsThePapersGridWithThePerSizeSettingsInEachTrial) {
  absl::StatusOr<SweepSpec> spec = ParseSweepSpec(ReadFile(kPaperDir / "fineweb-edu.yaml"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<std::vector<TrialSpec>> trials = ExpandSweep(*spec);
  ASSERT_TRUE(trials.ok()) << trials.status();
  std::set<std::string> rows;
  std::map<std::string, int> per_scale;
  for (const TrialSpec& trial : *trials) {
    const json config = json::parse(trial.config_json);
    rows.insert(config.at("method").get<std::string>() +
                (config.contains("p") ? " p=" + config.at("p").dump() : ""));
    const std::string scale = config.at("scale");
    ++per_scale[scale];
    // The stored config is the effective one: the recipe's values are in it.
    const PaperSize* size = nullptr;
    for (const PaperSize& s : kTable6) size = scale == s.scale ? &s : size;
    ASSERT_NE(size, nullptr) << scale;
    EXPECT_DOUBLE_EQ(config.at("learning_rate").get<double>(), size->learning_rate);
    EXPECT_DOUBLE_EQ(config.at("min_lr").get<double>(), size->learning_rate / 10);
    EXPECT_EQ(config.at("max_iters"), 50000);
    EXPECT_EQ(config.at("device"), "cuda");
    TrainConfig checked;
    ASSERT_EQ(ApplyConfigJson(config, &checked), absl::OkStatus());
    ASSERT_EQ(FinalizeConfig(&checked), absl::OkStatus());
    EXPECT_EQ(checked.n_layer, size->n_layer);
    ExpectTable7(checked);
  }
  EXPECT_EQ(rows, (std::set<std::string>{"pre_ln", "pre_dyt", "peri_ln", "keel", "geonorm",
                                         "p_spheret p=0.5", "p_spheret p=1.0", "p_spheret p=2.0"}));
  EXPECT_EQ(per_scale, (std::map<std::string, int>{{"S", 8}, {"M", 8}, {"L", 8}}));
}

TEST(PaperSweepsTest, EveryFileAndItsCpuTwinExpand) {
  int files = 0;
  for (const auto& entry : fs::directory_iterator(kPaperDir)) {
    if (entry.path().extension() != ".yaml") continue;
    const fs::path twin =
        kPaperDir / "cpu" /
        (entry.path().stem().string() + "-cpu" + entry.path().extension().string());
    for (const fs::path& path : {entry.path(), twin}) {
      SCOPED_TRACE(path.string());
      ASSERT_TRUE(fs::exists(path)) << "every paper sweep has a CPU twin";
      absl::StatusOr<SweepSpec> spec = ParseSweepSpec(ReadFile(path));
      ASSERT_TRUE(spec.ok()) << spec.status();
      absl::StatusOr<std::vector<TrialSpec>> trials = ExpandSweep(*spec);
      ASSERT_TRUE(trials.ok()) << trials.status();
      EXPECT_GT(trials->size(), 1u);
      const bool cpu = path.parent_path().filename() == "cpu";
      EXPECT_EQ(spec->resources.gpus == 0, cpu);
      const json first = json::parse(trials->front().config_json);
      if (cpu) {
        EXPECT_LE(first.at("max_iters").get<int64_t>(), 100) << "a twin finishes on two cores";
      }
    }
    ++files;
  }
  EXPECT_EQ(files, 7) << "FineWeb-Edu and OpenWebText (Tables 2-5 with spheret eval); the p, "
                         "angle-cap, decay, decay-index, ScaleNorm ablations";
}

// Every trial of every paper sweep (and twin) says each sphere knob in its own config, and the
// ScaleNorm choice is §4.2's unless the file is the ScaleNorm ablation: on for p_spheret (and
// cay/proj), off for geonorm. The paper files log the geometry (diag and jacobian intervals).
TEST(PaperSweepsTest, EveryTrialPinsTheSphereKnobsAndLogsGeometry) {
  int trials_seen = 0;
  for (const fs::path& dir : {kPaperDir, kPaperDir / "cpu"}) {
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.path().extension() != ".yaml") continue;
      SCOPED_TRACE(entry.path().string());
      absl::StatusOr<SweepSpec> spec = ParseSweepSpec(ReadFile(entry.path()));
      ASSERT_TRUE(spec.ok()) << spec.status();
      absl::StatusOr<std::vector<TrialSpec>> trials = ExpandSweep(*spec);
      ASSERT_TRUE(trials.ok()) << trials.status();
      const bool scalenorm_axis = entry.path().stem().string().find("scalenorm") == 0;
      for (const TrialSpec& trial : *trials) {
        const json config = json::parse(trial.config_json);
        for (const char* key : {"scalenorm", "decay", "decay_index", "angle_max", "diag_interval",
                                "jacobian_interval"}) {
          EXPECT_TRUE(config.contains(key)) << key << " not pinned in " << trial.config_json;
        }
        EXPECT_GT(config.value("diag_interval", 0), 0);
        EXPECT_GT(config.value("jacobian_interval", 0), 0);
        const std::string method = config.value("method", "");
        if (!scalenorm_axis && method == "geonorm") {
          EXPECT_EQ(config.at("scalenorm"), false);
        }
        if (!scalenorm_axis && method == "p_spheret") {
          EXPECT_EQ(config.at("scalenorm"), true);
        }
        TrainConfig checked;
        ASSERT_EQ(ApplyConfigJson(config, &checked), absl::OkStatus()) << trial.config_json;
        ++trials_seen;
      }
    }
  }
  EXPECT_GT(trials_seen, 100);
}

}  // namespace
}  // namespace spheret
