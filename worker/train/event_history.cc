#include "worker/train/event_history.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

namespace spheret::train {
namespace {

// Whether a run resumed at `resume_step` will not emit `event` again.
bool KeptOnResume(const nlohmann::json& event, int64_t resume_step) {
  if (!event.is_object() || !event.contains("step") || !event.at("step").is_number_integer()) {
    return false;
  }
  const int64_t step = event.at("step").get<int64_t>();
  if (step < resume_step) return true;
  if (step > resume_step) return false;
  const std::string type = event.value("type", "");
  const std::string name = event.value("name", "");
  return type == "checkpoint" || (type == "metric" && name.rfind("val/", 0) == 0);
}

}  // namespace

EventHistory::~EventHistory() {
  if (file_ != nullptr) std::fclose(file_);
}

std::string EventHistory::Open(const std::string& path, int64_t resume_step,
                               std::vector<std::string>* kept) {
  std::vector<std::string> lines;
  if (resume_step >= 0) {
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) {
      const nlohmann::json event = nlohmann::json::parse(line, nullptr, false);
      if (KeptOnResume(event, resume_step)) lines.push_back(line);
    }
  }
  const std::string temp = path + ".tmp";
  FILE* out = std::fopen(temp.c_str(), "w");
  if (out == nullptr) return "cannot write " + temp + ": " + std::strerror(errno);
  for (const std::string& line : lines) std::fprintf(out, "%s\n", line.c_str());
  if (std::fflush(out) != 0 || fsync(fileno(out)) != 0 || std::fclose(out) != 0 ||
      std::rename(temp.c_str(), path.c_str()) != 0) {
    return "cannot write " + path + ": " + std::strerror(errno);
  }
  file_ = std::fopen(path.c_str(), "a");
  if (file_ == nullptr) return "cannot append to " + path + ": " + std::strerror(errno);
  if (kept != nullptr) *kept = std::move(lines);
  return "";
}

void EventHistory::Append(const std::string& line) {
  if (file_ == nullptr) return;
  std::fprintf(file_, "%s\n", line.c_str());
  std::fflush(file_);
}

void EventHistory::Sync() {
  if (file_ != nullptr) fsync(fileno(file_));
}

}  // namespace spheret::train
