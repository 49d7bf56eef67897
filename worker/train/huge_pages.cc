#include "worker/train/huge_pages.h"

#include <sys/mman.h>

#include <algorithm>
#include <fstream>
#include <string>

namespace spheret::train {
namespace {

#ifndef MADV_COLLAPSE
constexpr int MADV_COLLAPSE = 25;  // Linux 6.1's value, for older headers
#endif
constexpr uintptr_t kHugePage = uintptr_t{2} << 20;

}  // namespace

long BackHeapWithHugePages() {
  // The heap may show as several adjacent [heap] lines (an earlier call splits it where the
  // advice starts and ends): their union.
  uintptr_t begin = UINTPTR_MAX, end = 0;
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    if (line.find("[heap]") == std::string::npos) continue;
    const size_t dash = line.find('-');
    begin = std::min<uintptr_t>(begin, std::stoull(line.substr(0, dash), nullptr, 16));
    end = std::max<uintptr_t>(end, std::stoull(line.substr(dash + 1), nullptr, 16));
  }
  begin = (begin + kHugePage - 1) & ~(kHugePage - 1);  // none found: end 0 <= begin
  end &= ~(kHugePage - 1);
  if (end <= begin) return 0;
  void* start = reinterpret_cast<void*>(begin);
  if (madvise(start, end - begin, MADV_HUGEPAGE) != 0) return 0;
  madvise(start, end - begin, MADV_COLLAPSE);  // may collapse part and refuse the rest
  return static_cast<long>(end - begin);
}

}  // namespace spheret::train
