// `spheret watch`: follows WatchSweep. On a terminal it redraws one progress bar per trial in
// place; piped, it prints a line when a trial changes state and at most every 10 s of progress.
#include <chrono>
#include <cmath>
#include <iostream>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/printable.h"
#include "client/commands.h"
#include "client/fetch.h"
#include "client/proto_text.h"
#include "client/report/table.h"
#include "config/knob_text.h"

namespace spheret::client {
namespace {

using Clock = std::chrono::steady_clock;

struct Followed {
  v1::Trial trial;
  TrialConfig config;  // parsed when first seen: a trial's config never changes
  std::string label;   // "#12 p_spheret 0.5 xs 1337", from the config
  TrialProgress progress;
  Clock::time_point first_seen;
  int64_t first_step = -1;
  Clock::time_point last_printed;
  std::string printed_state;
};

std::string Label(const v1::Trial& trial, const TrialConfig& config) {
  std::string label = absl::StrCat("#", trial.trial_id());
  if (trial.eval_of() > 0) absl::StrAppend(&label, " eval #", trial.eval_of());
  for (const char* key : kIdentityKnobs) {
    if (config.Find(key) != nullptr) absl::StrAppend(&label, " ", config.KnobText(key));
  }
  return PrintableText(label);  // a config's strings are the submitter's
}

std::string Eta(const Followed& followed) {
  const TrialProgress& p = followed.progress;
  const double seconds = std::chrono::duration<double>(Clock::now() - followed.first_seen).count();
  if (p.max_iters <= 0 || p.step <= followed.first_step || seconds <= 0) return "--:--";
  const double rate = (p.step - followed.first_step) / seconds;  // steps per second
  const int64_t left = static_cast<int64_t>((p.max_iters - p.step) / rate);
  return absl::StrFormat("%d:%02d:%02d", left / 3600, left / 60 % 60, left % 60);
}

std::string Line(const Followed& followed, bool bar) {
  const TrialProgress& p = followed.progress;
  std::string line =
      absl::StrFormat("%-32s %-9s", followed.label, TrialStateText(followed.trial.state()));
  if (followed.trial.eval_of() > 0) {  // an evaluation job: no steps of its own
    return absl::StrCat(line, " zero-shot of its checkpoint at step ", followed.trial.eval_step());
  }
  if (bar && p.max_iters > 0) {
    constexpr int kWidth = 24;
    const int filled = static_cast<int>(
        kWidth * std::min<double>(1.0, std::max<int64_t>(0, p.step) / double(p.max_iters)));
    absl::StrAppend(&line, " [", std::string(filled, '#'), std::string(kWidth - filled, '.'), "]");
  }
  absl::StrAppend(&line, " step ", p.step < 0 ? "-" : std::to_string(p.step));
  if (p.max_iters > 0) absl::StrAppend(&line, "/", p.max_iters);
  if (!std::isnan(p.train_loss)) absl::StrAppend(&line, " loss ", FormatNumber(p.train_loss, 4));
  if (!std::isnan(p.val_loss)) absl::StrAppend(&line, " val ", FormatNumber(p.val_loss, 4));
  if (followed.trial.state() == v1::TRIAL_STATE_RUNNING)
    absl::StrAppend(&line, " ETA ", Eta(followed));
  return line;
}

class Screen {
 public:
  explicit Screen(std::ostream& out) : out_(out) {}
  // Replaces the block drawn last time with `lines`.
  void Draw(const std::vector<std::string>& lines) {
    if (drawn_ > 0) out_ << "\x1b[" << drawn_ << "A";
    for (const std::string& line : lines) out_ << "\r\x1b[2K" << line << "\n";
    for (int i = static_cast<int>(lines.size()); i < drawn_; ++i) out_ << "\r\x1b[2K\n";
    drawn_ = std::max<int>(drawn_, lines.size());
    out_.flush();
  }

 private:
  std::ostream& out_;
  int drawn_ = 0;
};

std::vector<std::string> LiveLines(const std::map<int64_t, Followed>& trials) {
  constexpr size_t kMaxLines = 40;
  std::map<std::string, int> counts;
  std::vector<std::string> lines;
  for (const auto& [id, followed] : trials) {
    ++counts[TrialStateText(followed.trial.state())];
    const bool shown =
        followed.trial.state() == v1::TRIAL_STATE_RUNNING || trials.size() <= kMaxLines;
    if (shown && lines.size() < kMaxLines) lines.push_back(Line(followed, /*bar=*/true));
  }
  std::string summary = absl::StrCat(trials.size(), " trials:");
  for (const auto& [state, count] : counts) absl::StrAppend(&summary, " ", state, " ", count);
  lines.push_back(summary);
  return lines;
}

// What watch has seen, and how it shows it.
class Follower {
 public:
  Follower(std::ostream& out, bool live) : out_(out), live_(live), screen_(out) {}

  void Apply(const v1::Trial& trial) {
    const Clock::time_point now = Clock::now();
    Followed& followed = trials_[trial.trial_id()];
    if (followed.label.empty()) {
      followed.config = ConfigOf(trial);
      followed.label = Label(trial, followed.config);
    }
    followed.trial = trial;
    followed.progress = ProgressOf(trial, followed.config);
    if (followed.first_step < 0 && followed.progress.step >= 0) {
      followed.first_step = followed.progress.step;
      followed.first_seen = now;
    }
    if (live_) {
      if (now - last_draw_ > std::chrono::milliseconds(200)) {
        screen_.Draw(LiveLines(trials_));
        last_draw_ = now;
      }
      return;
    }
    const std::string state = TrialStateText(trial.state());
    if (state != followed.printed_state || now - followed.last_printed > std::chrono::seconds(10)) {
      out_ << Line(followed, /*bar=*/false) << "\n" << std::flush;
      followed.printed_state = state;
      followed.last_printed = now;
    }
  }

  void Finish(int64_t sweep_id) {
    if (live_) screen_.Draw(LiveLines(trials_));
    std::map<std::string, int> counts;
    for (const auto& [id, followed] : trials_) ++counts[TrialStateText(followed.trial.state())];
    std::string summary = absl::StrCat("sweep ", sweep_id, " ended:");
    for (const auto& [state, count] : counts) absl::StrAppend(&summary, " ", state, " ", count);
    out_ << summary << "\n";
  }

 private:
  std::ostream& out_;
  const bool live_;
  Screen screen_;
  std::map<int64_t, Followed> trials_;
  Clock::time_point last_draw_;
};

}  // namespace

absl::Status Watch(Connection& connection, const WatchOptions& options, std::ostream& out) {
  // A coordinator that restarts (or a network that drops) during a long sweep: reconnect with
  // back-off, up to about half an hour, once the sweep has been seen at all.
  constexpr int kMaxReconnects = 60;
  v1::WatchSweepRequest request;
  request.set_sweep_id(options.sweep_id);
  Follower follower(out, options.live);
  bool seen = false;
  for (int reconnects = 0;;) {
    std::unique_ptr<grpc::ClientContext> context = connection.Context(/*stream=*/true);
    std::unique_ptr<grpc::ClientReader<v1::WatchSweepEvent>> reader =
        connection.sweeps().WatchSweep(context.get(), request);
    v1::WatchSweepEvent event;
    while (reader->Read(&event)) {
      seen = true;
      reconnects = 0;
      follower.Apply(event.trial());
    }
    const grpc::Status status = reader->Finish();
    if (status.ok()) break;
    const bool transient = status.error_code() == grpc::StatusCode::UNAVAILABLE ||
                           status.error_code() == grpc::StatusCode::CANCELLED;
    if (!seen || !transient || ++reconnects > kMaxReconnects) {
      return connection.Error(status, absl::StrCat("watch ", options.sweep_id));
    }
    const int wait_s = std::min(30, 1 << std::min(reconnects, 5));
    std::cerr << "spheret: lost the coordinator at " << connection.address() << " ("
              << status.error_message() << "); reconnecting in " << wait_s << " s\n";
    std::this_thread::sleep_for(std::chrono::seconds(wait_s));
  }
  follower.Finish(options.sweep_id);
  return absl::OkStatus();
}

}  // namespace spheret::client
