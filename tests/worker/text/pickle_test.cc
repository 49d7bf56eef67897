#include "worker/text/pickle.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "worker/text/data_files.h"

namespace spheret::train {
namespace {

std::string FromHex(const std::string& hex) {
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return bytes;
}

// pickle.dumps(meta) (protocol 4) of nanoGPT's shakespeare_char prepare.py for the text "hi
// there\n".
const char kMetaPkl[] =
    "80049570000000000000007d94288c0a766f6361625f73697a65944b078c0469746f73947d94284b008c010a944b01"
    "8c0120944b028c0165944b038c0168944b048c0169944b058c0172944b068c017494758c0473746f69947d94286804"
    "4b0068054b0168064b0268074b0368084b0468094b05680a4b0675752e";
// pickle.dumps({'vocab_size': 50257, 'big': 2**40, 'neg': -5, 'f': 1.5, 'l': [1, 'a', None, True]},
// protocol=4)
const char kMixedPkl[] =
    "8004954b000000000000007d94288c0a766f6361625f73697a65944d51c48c03626967948a06000000000001"
    "8c036e6567944afbffffff8c016694473ff80000000000008c016c945d94284b018c0161944e8865752e";

TEST(PickleTest, ReadsNanoGptMeta) {
  nlohmann::json value;
  ASSERT_EQ(ReadPickle(FromHex(kMetaPkl), &value), absl::OkStatus());
  EXPECT_EQ(value["vocab_size"], 7);
  EXPECT_EQ(value["itos"]["0"], "\n");
  EXPECT_EQ(value["itos"]["6"], "t");
  EXPECT_EQ(value["stoi"]["h"], 3);  // Memoized strings (BINGET) resolve.
}

TEST(PickleTest, ReadsIntsFloatsListsAndConstants) {
  nlohmann::json value;
  ASSERT_EQ(ReadPickle(FromHex(kMixedPkl), &value), absl::OkStatus());
  EXPECT_EQ(value["vocab_size"], 50257);
  EXPECT_EQ(value["big"].get<int64_t>(), int64_t{1} << 40);
  EXPECT_EQ(value["neg"].get<int64_t>(), -5);
  EXPECT_DOUBLE_EQ(value["f"].get<double>(), 1.5);
  EXPECT_EQ(value["l"], nlohmann::json::parse(R"([1, "a", null, true])"));
}

TEST(PickleTest, RefusesCodeAndDamage) {
  nlohmann::json value;
  // Found by the fuzzer (tests/fuzz/corpus/pickle): a str that is not UTF-8 threw out of the
  // reader when it became a dict key.
  EXPECT_NE(ReadPickle(std::string("\x80\x04}(\x8c\x01\x91K\x01u.", 11), &value)
                .message()
                .find("or not UTF-8 at byte"),
            std::string::npos);
  // pickle of a class instance starts with GLOBAL ('c'): never executed, refused.
  EXPECT_NE(ReadPickle(std::string("\x80\x02"
                                   "cos\nsystem\n",
                                   13),
                       &value)
                .message()
                .find("unsupported pickle opcode 0x63"),
            std::string::npos);
  const std::string meta = FromHex(kMetaPkl);
  EXPECT_NE(ReadPickle(meta.substr(0, 40), &value), absl::OkStatus());
}

// Before: a list appended with its own memoized copy doubles at each 5 bytes: 150 bytes of
// meta.pkl reached a billion values (the trainer killed for memory); here 22 doublings.
TEST(PickleTest, MemoCopiesAreBoundedNotExponential) {
  std::string bomb = std::string("\x80\x04]q\x00", 5);  // a list, memo 0
  for (int i = 0; i < 22; ++i)
    bomb += std::string(
        "h\x00"
        "aq\x00",
        5);  // L += [memo 0]; memo 0 = L
  bomb += ".";
  nlohmann::json value;
  EXPECT_NE(ReadPickle(bomb, &value).message().find("memo copies past the limit of 524288 values"),
            std::string::npos);
}

// Before: copying a value 100,000 lists deep into the memo recursed once per level (SIGSEGV).
TEST(PickleTest, DeepValuesAreNotCopiedOrDumped) {
  const int depth = 100000;
  std::string deep = std::string("\x80\x04", 2) + std::string(depth, ']') +
                     std::string(depth - 1, 'a');  // each list appended into the one below
  nlohmann::json value;
  EXPECT_NE(ReadPickle(deep + "\x94.", &value).message().find("512 levels of nesting"),
            std::string::npos);
  // The same list as a dict key (dumped as JSON).
  EXPECT_NE(ReadPickle(std::string("\x80\x04}", 3) + std::string(depth, ']') +
                           std::string(depth - 1, 'a') + "Ns.",
                       &value)
                .message()
                .find("512 levels of nesting"),
            std::string::npos);
  // Deep but never copied: read (and freed) whole.
  EXPECT_EQ(ReadPickle(deep + ".", &value), absl::OkStatus());
}

TEST(PickleTest, DatasetFolderWithMetaPkl) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("spheret_pkl_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string meta = FromHex(kMetaPkl);
  std::ofstream(dir / "meta.pkl", std::ios::binary)
      .write(meta.data(), static_cast<long>(meta.size()));
  DatasetMeta read;
  EXPECT_EQ(ReadDatasetMeta(dir.string(), &read), absl::OkStatus());
  EXPECT_EQ(read.vocab_size, 7);
  EXPECT_EQ(read.tokenizer, "char");
  std::ofstream(dir / "meta.pkl", std::ios::binary) << "junk";
  EXPECT_NE(ReadDatasetMeta(dir.string(), &read).message().find("meta.pkl"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace spheret::train
