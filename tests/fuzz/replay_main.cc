// The fuzz targets without libFuzzer: runs each file given (or each file of each folder given)
// through LLVMFuzzerTestOneInput once. Built with the project's compiler, it replays the corpus
// under tests/fuzz/corpus, where every input that once crashed a target is kept, in the default
// test suite; the libFuzzer builds (clang) explore from the same corpus.
//   <target>_replay FILE|DIR...
//   checkpoint_replay --write-seed FILE     (the checkpoint target only: a valid seed file)
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" int SpheretFuzzWriteSeed(const char* path) __attribute__((weak));

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--write-seed") == 0) {
    if (SpheretFuzzWriteSeed == nullptr) {
      std::cerr << "this target has no seed writer\n";
      return 2;
    }
    return SpheretFuzzWriteSeed(argv[2]);
  }
  std::vector<std::filesystem::path> files;
  for (int i = 1; i < argc; ++i) {
    if (std::filesystem::is_directory(argv[i])) {
      for (const auto& entry : std::filesystem::directory_iterator(argv[i])) {
        if (entry.is_regular_file()) files.push_back(entry.path());
      }
    } else {
      files.emplace_back(argv[i]);
    }
  }
  if (files.empty()) {
    std::cerr << "usage: " << argv[0] << " FILE|DIR...: no input files\n";
    return 2;
  }
  for (const std::filesystem::path& file : files) {
    std::ifstream in(file, std::ios::binary);
    if (!in) {
      std::cerr << "cannot read " << file << "\n";
      return 1;
    }
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  std::cout << "replayed " << files.size() << " input(s) from the corpus\n";
  return 0;
}
