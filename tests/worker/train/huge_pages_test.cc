#include "worker/train/huge_pages.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "config/train_config.h"
#include "tests/worker/train/tiny_config.h"
#include "worker/train/events.h"
#include "worker/train/trainer.h"

namespace spheret::train {
namespace {

// The VmFlags of the mapping that holds `address`, from /proc/self/smaps ("" if none).
std::string VmFlagsAt(const void* address) {
  const auto at = reinterpret_cast<uintptr_t>(address);
  std::ifstream smaps("/proc/self/smaps");
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    const size_t dash = line.find('-');
    if (dash != std::string::npos && dash < 17 && line.find(' ') > dash) {  // a mapping's line
      const uintptr_t begin = std::stoull(line.substr(0, dash), nullptr, 16);
      const uintptr_t end = std::stoull(line.substr(dash + 1), nullptr, 16);
      inside = begin <= at && at < end;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

// The bytes of the heap's mappings that carry the huge-page advice ("hg" in their VmFlags).
long AdvisedHeapBytes() {
  std::ifstream smaps("/proc/self/smaps");
  long advised = 0, size = 0;
  bool heap = false;
  for (std::string line; std::getline(smaps, line);) {
    if (line.find("[heap]") != std::string::npos) {
      heap = true;
      const size_t dash = line.find('-');
      size = static_cast<long>(std::stoull(line.substr(dash + 1), nullptr, 16) -
                               std::stoull(line.substr(0, dash), nullptr, 16));
    } else if (line.rfind("VmFlags:", 0) == 0) {
      if (heap && line.find(" hg") != std::string::npos) advised += size;
      heap = false;
    }
  }
  return advised;
}

// n blocks of 64 KB (below glibc's mmap threshold, so on the heap), each filled with its index.
std::vector<char*> HeapBlocks(int n) {
  std::vector<char*> blocks;
  for (int i = 0; i < n; ++i) {
    blocks.push_back(static_cast<char*>(std::malloc(64 << 10)));
    std::memset(blocks.back(), i & 0xff, 64 << 10);
  }
  return blocks;
}

TEST(HugePagesTest, AdvisesTheHeap) {
  if (!std::filesystem::exists("/sys/kernel/mm/transparent_hugepage/enabled")) {
    GTEST_SKIP() << "this kernel has no transparent huge pages";
  }
  const std::vector<char*> blocks = HeapBlocks(1024);  // 64 MB
  const char* middle = blocks[512];
  EXPECT_EQ(VmFlagsAt(middle).find(" hg"), std::string::npos) << VmFlagsAt(middle);

  EXPECT_GE(BackHeapWithHugePages(), 32l << 20);
  EXPECT_NE(VmFlagsAt(middle).find(" hg"), std::string::npos) << VmFlagsAt(middle);
  // Twice is fine: the advice split the heap into several lines, and their union is taken.
  EXPECT_GE(BackHeapWithHugePages(), 32l << 20);
  for (size_t i = 0; i < blocks.size(); ++i) {
    ASSERT_EQ(blocks[i][100], static_cast<char>(i & 0xff));  // the contents are kept
    std::free(blocks[i]);
  }
}

// A training run of 250 steps or more advises the heap after its second step; a shorter one, which
// would not win the collapse's time back, leaves it alone.
TEST(HugePagesTest, ATrainingRunLongEnoughAdvisesTheHeap) {
  if (!std::filesystem::exists("/sys/kernel/mm/transparent_hugepage/enabled")) {
    GTEST_SKIP() << "this kernel has no transparent huge pages";
  }
  if (AdvisedHeapBytes() > 0) GTEST_SKIP() << "an earlier test in this process advised the heap";
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("spheret_huge_pages_" + std::to_string(::getpid()));
  ASSERT_EQ(testing::PrepareTinyData(dir), absl::OkStatus());
  TrainConfig config = testing::TinyTrainConfig((dir / "data").string());
  config.gradient_accumulation_steps = 1;
  config.eval_iters = 1;
  const auto train = [&](int64_t steps, const std::string& run) {
    config.max_iters = config.lr_decay_iters = config.eval_interval = steps;
    TrainConfig finalized = config;
    EXPECT_EQ(FinalizeConfig(&finalized), absl::OkStatus());
    std::ostringstream events_text, log;
    EventWriter events(&events_text);
    EXPECT_EQ(Train(finalized, {(dir / run).string(), false}, &events, &log).status,
              absl::OkStatus());
  };
  train(249, "short");
  EXPECT_EQ(AdvisedHeapBytes(), 0);
  train(250, "long");
  EXPECT_GT(AdvisedHeapBytes(), 0);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace spheret::train
