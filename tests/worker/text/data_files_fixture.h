// DataFilesTest: a temporary folder with two small text files (in/a.txt, in/b.txt) and helpers to
// write token files, for the data set tests (text_test) and the batch-sampling one (train_test).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace spheret::train {

inline ::testing::AssertionResult Has(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << part << "'";
}

inline std::string Slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

class DataFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("spheret_data_files_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_ / "in");
    std::ofstream(dir_ / "in" / "a.txt") << std::string(900, 'a');
    std::ofstream(dir_ / "in" / "b.txt") << std::string(100, 'b');
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void WriteTokens(const std::filesystem::path& path, const std::vector<uint16_t>& ids) {
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(ids.data()),
               static_cast<std::streamsize>(ids.size() * 2));
  }
  std::filesystem::path dir_;
};

}  // namespace spheret::train
