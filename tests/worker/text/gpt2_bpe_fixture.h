// Gpt2BpeTest: a tiny GPT-2 vocabulary (the 256 byte symbols and five merges) written to a
// temporary folder and loaded, for the tokenizer tests (text_test) and the end-to-end one that
// trains on its data set (train_test).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "worker/text/bpe.h"

namespace spheret::train {

class Gpt2BpeTest : public ::testing::Test {
 protected:
  // A tiny vocabulary: the 256 byte symbols, then merges "h e", "l l", "he ll", "Ġ w", "o r".
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("spheret_bpe_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    nlohmann::json encoder = nlohmann::json::object();
    int id = 0;
    for (int b = 0; b < 256; ++b) encoder[ByteSymbol(b)] = id++;
    for (const char* merged : {"he", "ll", "hell", "\xc4\xa0w", "or"}) encoder[merged] = id++;
    encoder["<|endoftext|>"] = id++;
    std::ofstream(dir_ / "encoder.json") << encoder.dump();
    std::ofstream(dir_ / "vocab.bpe") << "#version: 0.2\nh e\nl l\nhe ll\n\xc4\xa0 w\no r\n";
    ASSERT_EQ(bpe_.Load((dir_ / "encoder.json").string(), (dir_ / "vocab.bpe").string()),
              absl::OkStatus());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // GPT-2's printable stand-in of byte b (bytes_to_unicode), written out here independently.
  static std::string ByteSymbol(int b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    int next = 256;
    for (int k = 0; k < b; ++k) {
      if (!((k >= '!' && k <= '~') || (k >= 0xA1 && k <= 0xAC) || k >= 0xAE)) ++next;
    }
    const char32_t cp = printable ? char32_t(b) : char32_t(next);
    std::string out;
    if (cp < 0x80) {
      out.push_back(char(cp));
    } else {
      out.push_back(char(0xC0 | (cp >> 6)));
      out.push_back(char(0x80 | (cp & 0x3F)));
    }
    return out;
  }

  std::filesystem::path dir_;
  Gpt2Bpe bpe_;
};

}  // namespace spheret::train
