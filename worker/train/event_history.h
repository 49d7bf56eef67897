// The event history of a run folder: every event the run emitted, as JSON lines in
// OUT/events.jsonl, so that a resumed run (possibly on another machine, after the one that ran it
// died with events still in flight) can emit the history up to its checkpoint again.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace spheret::train {

class EventHistory {
 public:
  EventHistory() = default;
  ~EventHistory();
  EventHistory(const EventHistory&) = delete;
  EventHistory& operator=(const EventHistory&) = delete;

  // Starts the history at `path`. With `resume_step` < 0 (a fresh run) the file starts empty.
  // Otherwise only the events a run resumed at that step does not emit again are kept: those of
  // earlier steps, and the evaluation metrics and checkpoint of the step itself; *kept receives
  // them. InvalidArgument names the file it cannot write.
  absl::Status Open(const std::string& path, int64_t resume_step, std::vector<std::string>* kept);
  // Appends one line (flushed, so a killed process loses nothing it wrote).
  void Append(const std::string& line);
  // Makes what was appended durable (fsync); called before each checkpoint.
  void Sync();

 private:
  FILE* file_ = nullptr;
};

}  // namespace spheret::train
