// The safetensors reader and writer, and the GPT-2 export and init_from import
// (worker/train/hf_gpt2.h). transformers itself checks the export in tests/worker/lm/
// hf_export_test.py.
#include "worker/train/hf_gpt2.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "tests/worker/train/tiny_config.h"
#include "worker/train/run_folder.h"
#include "worker/train/safetensors.h"
#include "worker/train/train_data.h"
#include "worker/train/trainer.h"

namespace spheret::train {
namespace {
namespace fs = std::filesystem;

class HfGpt2Test : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("hf_gpt2_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    ASSERT_TRUE(testing::PrepareTinyData(dir_).ok());
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A finalized tiny config of `method` on the tiny data set.
  TrainConfig Config(const std::string& method, int64_t steps) {
    TrainConfig config = testing::TinyTrainConfig((dir_ / "data").string());
    config.data_root = dir_.string();  // init_from folders lie under it
    config.max_iters = steps;
    config.eval_interval = std::max<int64_t>(steps, 1);
    config.lr_decay_iters = 40;
    EXPECT_TRUE(ApplyConfigOverride("method=" + method, &config).ok());
    EXPECT_TRUE(FinalizeConfig(&config).ok());
    return config;
  }
  std::string Trained(const std::string& name, const TrainConfig& config) {
    TrainOptions options;
    options.out_dir = (dir_ / name).string();
    std::ostringstream events_text, log;
    EventWriter events(&events_text);
    const TrainResult result = Train(config, options, &events, &log);
    EXPECT_TRUE(result.status.ok()) << result.status << log.str();
    return options.out_dir;
  }
  std::map<std::string, torch::Tensor> Weights(const std::string& run) {
    TrainConfig config;
    EXPECT_TRUE(ReadRunConfig(run, &config).ok());
    nn::Gpt model{nullptr};
    int64_t step = 0;
    EXPECT_TRUE(LoadRunModel(run, config, &model, &step).ok());
    std::map<std::string, torch::Tensor> out;
    for (const auto& item : model->named_parameters()) out[item.key()] = item.value().detach();
    return out;
  }
  fs::path dir_;
};

TEST_F(HfGpt2Test, SafetensorsRoundTripAndDamagedFilesAreRefusedNamingThePath) {
  const std::vector<float> a = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, 8.0f};
  const std::vector<int64_t> b = {1, 2, 3};
  const std::string path = (dir_ / "t.safetensors").string();
  ASSERT_TRUE(
      WriteSafetensors(path, {{"a", "F32", {2, 3}, a.data(), 24}, {"b", "I64", {3}, b.data(), 24}},
                       {{"format", "pt"}})
          .ok());
  SafetensorsFile file;
  ASSERT_TRUE(file.Open(path).ok());
  EXPECT_EQ(file.metadata().at("format"), "pt");
  EXPECT_EQ(file.entries().at("a").shape, (std::vector<int64_t>{2, 3}));
  std::vector<float> read(6);
  ASSERT_TRUE(file.Read("a", read.data()).ok());
  EXPECT_EQ(read, a);
  EXPECT_FALSE(WriteSafetensors(path, {{"a", "F32", {2, 2}, a.data(), 24}}, {}).ok());

  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const auto damaged = [&](const std::string& content) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
    const absl::Status status = SafetensorsFile().Open(path);
    EXPECT_FALSE(status.ok());
    EXPECT_NE(status.message().find(path), std::string::npos) << status;
    return std::string(status.message());
  };
  EXPECT_NE(damaged(bytes.substr(0, bytes.size() - 8)).find("do not fit"), std::string::npos);
  EXPECT_NE(damaged(bytes.substr(0, 5)).find("shorter than"), std::string::npos);
  std::string huge = bytes;
  huge[5] = '\x7f';  // a header length past the file
  EXPECT_NE(damaged(huge).find("a header of"), std::string::npos);
  std::string foreign = bytes;
  foreign[8] = '[';
  EXPECT_NE(damaged(foreign).find("not JSON"), std::string::npos);
  std::string dtype = bytes;
  dtype.replace(dtype.find("I64"), 3, "Q64");
  EXPECT_NE(damaged(dtype).find("unknown dtype Q64"), std::string::npos);
}

// Issue 44, item 13: a safetensors header that names a tensor (or a metadata key) twice was read
// with the last one winning; the format forbids duplicates.
TEST_F(HfGpt2Test, HostileInputASafetensorsHeaderThatNamesAKeyTwiceIsRefused) {
  const std::string path = (dir_ / "twice.safetensors").string();
  const std::string tensor = R"({"dtype": "F32", "shape": [1], "data_offsets": [0, 4]})";
  for (const auto& [header, key] : std::vector<std::pair<std::string, std::string>>{
           {"{\"a\": " + tensor + ", \"a\": " + tensor + "}", "a"},
           {R"({"__metadata__": {"format": "pt", "format": "np"}, "a": )" + tensor + "}",
            "format"}}) {
    std::string bytes(8, '\0');
    bytes[0] = static_cast<char>(header.size());
    bytes += header + std::string(4, '\0');
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
    const absl::Status status = SafetensorsFile().Open(path);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << header;
    EXPECT_NE(status.message().find(path + ": not a valid safetensors file: its header names '" +
                                    key + "' twice"),
              std::string::npos)
        << status;
  }
}

TEST_F(HfGpt2Test, ExportThenImportGivesBitwiseTheSameWeights) {
  const std::string run = Trained("run", Config("pre_ln", 3));
  const std::string hf = (dir_ / "hf").string();
  HfExportReport report;
  ASSERT_TRUE(ExportHfGpt2(run, hf, &report).ok());
  EXPECT_EQ(report.step, 3);
  EXPECT_EQ(report.tensors, 2 + 2 * 12 + 2);
  EXPECT_FALSE(report.tokenizer);  // a byte-level data set
  EXPECT_EQ(report.no_tokenizer, "its data set is byte-level, not GPT-2 BPE");
  TrainConfig config = Config("pre_ln", 3);
  config.init_from = "hf-gpt2:" + hf;
  config.seed = 99;  // another random init, overwritten
  ASSERT_TRUE(ApplyInitFromShape(&config).ok());
  nn::Gpt model(ModelConfig(config, config.vocab_size));
  std::ostringstream log;
  ASSERT_TRUE(LoadHfGpt2Weights(hf, config, *model, log).ok()) << log.str();
  EXPECT_NE(log.str().find("28 tensors loaded"), std::string::npos) << log.str();
  EXPECT_EQ(log.str().find("defaults"), std::string::npos) << log.str();
  const std::map<std::string, torch::Tensor> trained = Weights(run);
  for (const auto& item : model->named_parameters()) {
    EXPECT_TRUE(torch::equal(item.value(), trained.at(item.key()))) << item.key();
  }
}

TEST_F(HfGpt2Test, ASphereMethodLoadsTheBlocksAndKeepsItsConnectionDefaults) {
  const std::string hf = (dir_ / "hf").string();
  HfExportReport report;
  ASSERT_TRUE(ExportHfGpt2(Trained("run", Config("pre_ln", 2)), hf, &report).ok());
  TrainConfig config = Config("geonorm", 2);
  config.init_from = "hf-gpt2:" + hf;
  ASSERT_TRUE(ApplyInitFromShape(&config).ok());
  nn::Gpt fresh(ModelConfig(config, config.vocab_size));
  nn::Gpt model(ModelConfig(config, config.vocab_size));
  std::ostringstream log;
  ASSERT_TRUE(LoadHfGpt2Weights(hf, config, *model, log).ok());
  EXPECT_NE(log.str().find("not used: transformer.h.0.ln_1.bias"), std::string::npos) << log.str();
  std::map<std::string, torch::Tensor> defaults;
  for (const auto& item : fresh->named_parameters()) defaults[item.key()] = item.value();
  SafetensorsFile file;
  ASSERT_TRUE(file.Open(hf + "/model.safetensors").ok());
  for (const auto& item : model->named_parameters()) {
    const std::string& name = item.key();
    if (name.find("conn_") != std::string::npos) {
      EXPECT_TRUE(torch::equal(item.value(), defaults.at(name))) << name;
    }
  }
  torch::Tensor c_fc = torch::empty({32, 128});
  ASSERT_TRUE(file.Read("transformer.h.1.mlp.c_fc.weight", c_fc.data_ptr()).ok());
  EXPECT_TRUE(torch::equal(model->block_at(1).mlp->c_fc->weight, c_fc.t()));
}

// Settings under which GPT-2 computes another function are refused, naming the key: each written
// into HF/config.json in turn (the last, a model_type of llama, stays there).
void ExpectSettingsOfAnotherFunctionRefused(const std::string& hf, TrainConfig* config) {
  std::ifstream in(hf + "/config.json");
  const nlohmann::json exported = nlohmann::json::parse(in);
  const auto refusal = [&](const char* key, const nlohmann::json& value) {
    nlohmann::json changed = exported;
    changed[key] = value;
    std::ofstream(hf + "/config.json") << changed.dump();
    return std::string(ApplyInitFromShape(config).message());
  };
  EXPECT_NE(refusal("activation_function", "relu").find("activation_function must be"),
            std::string::npos);
  EXPECT_NE(refusal("layer_norm_epsilon", 1e-6).find("layer_norm_epsilon must be 1e-5"),
            std::string::npos);
  EXPECT_NE(refusal("scale_attn_by_inverse_layer_idx", true).find("must be false"),
            std::string::npos);
  EXPECT_NE(refusal("model_type", 2).find("not a GPT-2 config"), std::string::npos);  // no throw
  EXPECT_NE(refusal("model_type", "llama").find("not a GPT-2 config"), std::string::npos);
}

TEST_F(HfGpt2Test, ShapeComesFromTheFolderAndConflictsAndForeignModelsAreRefused) {
  const std::string hf = (dir_ / "hf").string();
  HfExportReport report;
  ASSERT_TRUE(ExportHfGpt2(Trained("run", Config("pre_ln", 1)), hf, &report).ok());
  TrainConfig config = testing::TinyTrainConfig((dir_ / "data").string());
  config.data_root = dir_.string();
  config.n_layer = 12;
  config.explicit_keys.clear();
  ASSERT_TRUE(ApplyConfigOverride("init_from=hf-gpt2:" + hf, &config).ok());
  ASSERT_TRUE(ApplyConfigOverride("block_size=8", &config).ok());
  ASSERT_TRUE(FinalizeConfig(&config).ok());
  ASSERT_TRUE(ApplyInitFromShape(&config).ok());
  EXPECT_EQ(config.n_layer, 2);
  EXPECT_EQ(config.block_size, 8);  // cropped, as nanoGPT's crop_block_size
  nn::Gpt model(ModelConfig(config, config.vocab_size));
  std::ostringstream log;
  ASSERT_TRUE(LoadHfGpt2Weights(hf, config, *model, log).ok()) << log.str();

  ASSERT_TRUE(ApplyConfigOverride("n_embd=64", &config).ok());
  const absl::Status conflict = ApplyInitFromShape(&config);
  EXPECT_NE(conflict.message().find("'n_embd' is 64 but init_from"), std::string::npos) << conflict;
  TrainConfig rope = Config("pre_ln", 1);
  ASSERT_TRUE(ApplyConfigOverride("pos_encoding=rope", &rope).ok());
  ASSERT_TRUE(ApplyConfigOverride("init_from=hf-gpt2:" + hf, &rope).ok());
  EXPECT_NE(FinalizeConfig(&rope).message().find("learned positions"), std::string::npos);
  EXPECT_NE(ExportHfGpt2(Trained("geo", Config("geonorm", 1)), hf + "2", &report)
                .message()
                .find("its method is geonorm"),
            std::string::npos);
  ExpectSettingsOfAnotherFunctionRefused(hf, &config);
  // An export never writes over a run or over another model's folder.
  const std::string run = (dir_ / "run").string();
  EXPECT_NE(ExportHfGpt2(run, run, &report).message().find("holds a training run (ckpt.pt)"),
            std::string::npos);
  EXPECT_NE(ExportHfGpt2(run, hf, &report).message().find("not a GPT-2 model's"),
            std::string::npos);
}

// Issue 44, item 8: links planted at an export's names (a shared --out folder) were followed, their
// targets overwritten and the links renamed into place. Now each is refused, the target untouched.
TEST_F(HfGpt2Test, HostileInputLinksPlantedAtTheExportsNamesAreRefusedAndTheirTargetsUntouched) {
  const std::string run = Trained("run", Config("pre_ln", 1));
  const fs::path target = dir_ / "precious";
  for (const char* planted : {"model.safetensors.tmp", "config.json.tmp", "model.safetensors"}) {
    const fs::path out = dir_ / "hf";
    fs::remove_all(out);
    fs::create_directories(out);
    std::ofstream(target) << "precious";
    fs::create_symlink(target, out / planted);
    HfExportReport report;
    const absl::Status status = ExportHfGpt2(run, out.string(), &report);
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << planted << ": " << status;
    EXPECT_NE(status.message().find((out / planted).string() + ": it is a symbolic link"),
              std::string::npos)
        << status;
    std::ifstream in(target);
    EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "precious") << planted;
    EXPECT_TRUE(fs::is_symlink(out / planted)) << planted << ": the link is left where it was";
    EXPECT_FALSE(fs::is_symlink(out / "config.json")) << planted;
  }
}

// Issue 44, item 10: init_from's folder stays under --data-root; "../" or an absolute path that
// leaves it is refused naming the path and the root, even when it holds a valid GPT-2 folder.
TEST_F(HfGpt2Test, HostileInputAnInitFromFolderOutsideTheDataRootIsRefused) {
  HfExportReport report;
  ASSERT_TRUE(
      ExportHfGpt2(Trained("run", Config("pre_ln", 1)), (dir_ / "hf").string(), &report).ok());
  TrainConfig config = Config("pre_ln", 1);
  config.data_root = (dir_ / "data").string();  // dir_/hf is beside it, not in it
  for (const std::string& dir :
       std::vector<std::string>{"../hf", (dir_ / "hf").string(), "../../../../etc", "/etc"}) {
    config.init_from = "hf-gpt2:" + dir;
    const absl::Status status = ApplyInitFromShape(&config);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << dir;
    EXPECT_NE(status.message().find("config key 'init_from' (hf-gpt2:" + dir + ")"),
              std::string::npos)
        << status;
    EXPECT_NE(status.message().find("is outside --data-root " + config.data_root),
              std::string::npos)
        << status;
  }
  config.data_root = dir_.string();
  for (const std::string& dir :
       std::vector<std::string>{"hf", (dir_ / "hf").string(), "data/../hf"}) {
    config.init_from = "hf-gpt2:" + dir;
    EXPECT_TRUE(ApplyInitFromShape(&config).ok()) << dir;
  }
}

// nanoGPT's openwebtext folder has no meta.json: its ids are GPT-2's, the default vocab nanoGPT's
// padded 50304, and GPT-2's own 50257 (a model from init_from: hf-gpt2:) reads them too.
TEST_F(HfGpt2Test, AFolderWithoutMetaTakesGpt2sOwnVocab) {
  fs::remove(dir_ / "data" / "meta.json");
  TrainConfig config = Config("pre_ln", 1);
  config.vocab_size = 50257;
  absl::StatusOr<int64_t> vocab = TrainData(config).Open(1);
  ASSERT_TRUE(vocab.ok()) << vocab.status();
  EXPECT_EQ(*vocab, 50257);
  config.vocab_size = 50000;
  vocab = TrainData(config).Open(1);
  EXPECT_NE(vocab.status().message().find("'vocab_size' (50000) is below the dataset's 50257"),
            std::string::npos)
      << vocab.status();
}

}  // namespace
}  // namespace spheret::train
