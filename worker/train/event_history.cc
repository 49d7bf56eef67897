#include "worker/train/event_history.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <type_traits>
#include <variant>

#include "protocol/trainer_events.h"

namespace spheret::train {
namespace {

// Whether a run resumed at `resume_step` will not emit the event on `line` again.
bool KeptOnResume(const std::string& line, int64_t resume_step) {
  protocol::TrainerEvent event;
  if (!protocol::ParseTrainerEvent(line, &event).ok()) return false;
  const int64_t step = protocol::StepOf(event);
  if (step < 0 || step > resume_step) return false;
  if (step < resume_step) return true;
  if (std::holds_alternative<protocol::CheckpointEvent>(event)) return true;
  const auto* metric = std::get_if<protocol::MetricEvent>(&event);
  return metric != nullptr && metric->name.rfind("val/", 0) == 0;
}

}  // namespace

EventHistory::~EventHistory() {
  if (file_ != nullptr) std::fclose(file_);
}

absl::Status EventHistory::Open(const std::string& path, int64_t resume_step,
                                std::vector<std::string>* kept) {
  std::vector<std::string> lines;
  if (resume_step >= 0) {
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) {
      if (KeptOnResume(line, resume_step)) lines.push_back(line);
    }
  }
  const std::string temp = path + ".tmp";
  FILE* out = std::fopen(temp.c_str(), "w");
  if (out == nullptr)
    return absl::InvalidArgumentError("cannot write " + temp + ": " + std::strerror(errno));
  for (const std::string& line : lines) std::fprintf(out, "%s\n", line.c_str());
  if (std::fflush(out) != 0 || fsync(fileno(out)) != 0 || std::fclose(out) != 0 ||
      std::rename(temp.c_str(), path.c_str()) != 0) {
    return absl::InvalidArgumentError("cannot write " + path + ": " + std::strerror(errno));
  }
  file_ = std::fopen(path.c_str(), "a");
  if (file_ == nullptr)
    return absl::InvalidArgumentError("cannot append to " + path + ": " + std::strerror(errno));
  if (kept != nullptr) *kept = std::move(lines);
  return absl::OkStatus();
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
