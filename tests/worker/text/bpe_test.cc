#include "worker/text/bpe.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/worker/text/gpt2_bpe_fixture.h"
#include "worker/text/data_files.h"
#include "worker/text/prepare.h"
#include "worker/text/unicode_classes.h"

namespace spheret::train {
namespace {

namespace fs = std::filesystem;
using Pieces = std::vector<std::string>;

TEST(Gpt2SplitTest, FollowsGpt2Pattern) {
  EXPECT_EQ(SplitGpt2("Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(SplitGpt2("I'm  fine, they'll\n\nok 42x"),
            (Pieces{"I", "'m", " ", " fine", ",", " they", "'ll", "\n", "\n", "ok", " 42", "x"}));
  EXPECT_EQ(SplitGpt2("end   "), (Pieces{"end", "   "}));  // trailing spaces stay one piece
  EXPECT_EQ(SplitGpt2("a\n b"), (Pieces{"a", "\n", " b"}));
  EXPECT_EQ(SplitGpt2("''s --> x"), (Pieces{"''", "s", " -->", " x"}));
  EXPECT_EQ(SplitGpt2("caf\xc3\xa9 \xe2\x82\xac"
                      "5"),
            (Pieces{"caf\xc3\xa9", " \xe2\x82\xac", "5"}));
}

// The regex's classes are Unicode's, not the C library's: a superscript two and a Roman numeral
// are numbers, a no-break space is white space (glibc's C.UTF-8 says otherwise for each), a
// combining mark is no letter. tiktoken_parity_test checks whole texts against tiktoken.
TEST(Gpt2SplitTest, UnicodeClassesAreUnicodes) {
  EXPECT_FALSE(IsUnicodeLetter(U'\u0301'));
  EXPECT_TRUE(IsUnicodeLetter(U'\u00E9'));
  EXPECT_TRUE(IsUnicodeLetter(U'\U0001D400'));  // MATHEMATICAL BOLD CAPITAL A
  EXPECT_TRUE(IsUnicodeNumber(U'\u00B2'));
  EXPECT_TRUE(IsUnicodeNumber(U'\u2163'));  // ROMAN NUMERAL FOUR
  EXPECT_TRUE(IsUnicodeWhiteSpace(U'\u00A0'));
  EXPECT_TRUE(IsUnicodeWhiteSpace(U'\u3000'));
  EXPECT_FALSE(IsUnicodeWhiteSpace(U'\u200B'));  // ZERO WIDTH SPACE is not White_Space
  EXPECT_EQ(SplitGpt2("x\u00B2 a\u00A0b"), (Pieces{"x", "\u00B2", " a", "\u00A0", "b"}));
}

TEST_F(Gpt2BpeTest, MergesByRankAndRoundTrips) {
  EXPECT_EQ(bpe_.vocab_size(), 256 + 5 + 1);
  EXPECT_EQ(bpe_.eot(), 261);
  // "hello" -> he, ll, o -> hell, o ; " world" -> Ġw, or, l, d
  const std::vector<int64_t> ids = bpe_.Encode("hello world");
  EXPECT_EQ(ids, (std::vector<int64_t>{258, 'o', 259, 260, 'l', 'd'}));
  for (const std::string& text : {std::string("hello world"), std::string("tab\there\n\n  x"),
                                  std::string("caf\xc3\xa9 \xf0\x9f\x98\x80 \x01\x02")}) {
    EXPECT_EQ(bpe_.Decode(bpe_.Encode(text)), text);
  }
}

TEST_F(Gpt2BpeTest, ClearErrors) {
  Gpt2Bpe bpe;
  EXPECT_NE(bpe.Load((dir_ / "missing.json").string(), (dir_ / "vocab.bpe").string())
                .message()
                .find("missing.json"),
            std::string::npos);
  std::ofstream(dir_ / "bad.bpe") << "#version: 0.2\nlonely\n";
  EXPECT_NE(bpe.Load((dir_ / "encoder.json").string(), (dir_ / "bad.bpe").string())
                .message()
                .find("bad.bpe:2"),
            std::string::npos);
}

}  // namespace
}  // namespace spheret::train

namespace spheret::train {
namespace {

std::vector<uint16_t> ReadTokens(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<uint16_t> tokens(fs::file_size(path) / 2);
  in.read(reinterpret_cast<char*>(tokens.data()), static_cast<std::streamsize>(tokens.size() * 2));
  return tokens;
}

// A 3 MB text file is tokenized in ~1 MB pieces cut where GPT-2's pre-tokenizer splits anyway,
// on two threads: the ids are one Encode of the whole text, then end-of-text.
TEST_F(Gpt2BpeTest, PrepareCutsALargeFileIntoPiecesWithTheIdsOfOneEncode) {
  fs::create_directories(dir_ / "text");
  std::string text;
  for (int i = 0; text.size() < (3 << 20); ++i) {
    text += "hello world, line " + std::to_string(i) + (i % 7 == 0 ? "  \n\n" : "\n") +
            (i % 5 == 0 ? " indented\n" : "") + (i % 11 == 0 ? "\xc2\xa0\nnbsp\n" : "");
  }
  std::ofstream(dir_ / "text" / "big.txt") << text;
  PrepareOptions options{{(dir_ / "text").string()}, (dir_ / "data").string(), 0.1, dir_.string()};
  options.threads = 2;
  PrepareStats report;
  ASSERT_EQ(PrepareText(options, &report), absl::OkStatus());
  EXPECT_EQ(report.documents, 1);
  std::vector<uint16_t> ids = ReadTokens(dir_ / "data" / "train.bin");
  const std::vector<uint16_t> val = ReadTokens(dir_ / "data" / "val.bin");
  EXPECT_NEAR(static_cast<double>(val.size()) / (ids.size() + val.size()), 0.1, 1e-3);
  ids.insert(ids.end(), val.begin(), val.end());
  std::vector<int64_t> expected = bpe_.Encode(text);
  expected.push_back(bpe_.eot());
  EXPECT_EQ(std::vector<int64_t>(ids.begin(), ids.end()), expected);
}

// The documents of `side` (0: train.bin, 1: val.bin) of train.bin's tokens, 65535, val.bin's,
// cut at each end-of-text; a failure when tokens follow the last end-of-text.
std::vector<std::vector<int64_t>> DocumentsOfSide(const std::vector<uint16_t>& both, int side,
                                                  int64_t eot) {
  std::vector<std::vector<int64_t>> documents;
  int at = 0;
  std::vector<int64_t> current;
  for (uint16_t id : both) {
    if (id == 65535) {
      at = 1;
    } else if (id == eot) {
      if (at == side) documents.push_back(current);
      current.clear();
    } else {
      current.push_back(id);
    }
  }
  EXPECT_TRUE(current.empty());
  return documents;
}

// JSONL: each line's field is one document with its end-of-text; documents fall to train or val
// by a seeded hash of their index, whatever the thread count.
TEST_F(Gpt2BpeTest, PrepareSplitsJsonlDocumentsBySeedEachWithEndOfText) {
  fs::create_directories(dir_ / "jsonl");
  std::vector<std::string> documents;
  {
    std::ofstream out(dir_ / "jsonl" / "part-0.json");
    for (int i = 0; i < 300; ++i) {
      documents.push_back("hello " + std::string(i % 4, ' ') + "world " + std::to_string(i) +
                          (i % 3 ? "\nthere" : ""));
      out << nlohmann::json{{"id", i}, {"body", documents.back()}}.dump() << "\n";
      if (i == 10) out << "\n";  // blank lines are skipped
    }
  }
  std::vector<std::vector<uint16_t>> outputs;
  for (int threads : {1, 2}) {
    PrepareOptions options{
        {(dir_ / "jsonl").string()}, (dir_ / "data").string(), 0.2, dir_.string()};
    options.text_field = "body";
    options.threads = threads;
    PrepareStats report;
    ASSERT_EQ(PrepareText(options, &report), absl::OkStatus());
    EXPECT_EQ(report.documents, 300);
    std::vector<uint16_t> both = ReadTokens(dir_ / "data" / "train.bin");
    const std::vector<uint16_t> val = ReadTokens(dir_ / "data" / "val.bin");
    both.push_back(65535);
    both.insert(both.end(), val.begin(), val.end());
    outputs.push_back(both);
  }
  EXPECT_EQ(outputs[0], outputs[1]) << "the same files on one thread and on two";
  // Split both files at end-of-text: every document is whole, in order, on one side.
  const std::vector<std::vector<int64_t>> sides[2] = {DocumentsOfSide(outputs[0], 0, bpe_.eot()),
                                                      DocumentsOfSide(outputs[0], 1, bpe_.eot())};
  size_t next[2] = {0, 0};
  for (const std::string& document : documents) {
    const std::vector<int64_t> ids = bpe_.Encode(document);
    int where = -1;
    for (int s : {0, 1}) {
      if (where < 0 && next[s] < sides[s].size() && sides[s][next[s]] == ids) where = s;
    }
    ASSERT_GE(where, 0) << document;
    ++next[where];
  }
  EXPECT_EQ(next[0], sides[0].size());
  EXPECT_EQ(next[1], sides[1].size());
  EXPECT_NEAR(static_cast<double>(sides[1].size()) / 300, 0.2, 0.07) << "val_fraction of documents";
}

}  // namespace
}  // namespace spheret::train
