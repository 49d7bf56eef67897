#include "client/report/seed_account.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace spheret::client {
namespace {

// States in the order a lost seed is told by (the first that one of its trials has), with the
// word for them.
constexpr std::pair<TrialState, const char*> kLossWords[] = {
    {TrialState::kDiverged, "diverged"},        {TrialState::kFailed, "failed"},
    {TrialState::kCancelled, "cancelled"},      {TrialState::kPruned, "pruned"},
    {TrialState::kRunning, "running"},          {TrialState::kPending, "pending"},
    {TrialState::kSucceeded, "without a value"}};

size_t LossRank(TrialState state) {
  for (size_t i = 0; i < std::size(kLossWords); ++i) {
    if (state == kLossWords[i].first) return i;
  }
  return std::size(kLossWords);
}

std::string Word(TrialState state) {
  const size_t rank = LossRank(state);
  if (rank < std::size(kLossWords)) return kLossWords[rank].second;
  std::string lower = TrialStateName(state);
  std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
  return lower;
}

// "at" the step that diverged (or that a running trial reached); "after" the last step logged.
std::string Preposition(const SeedRun& run) {
  return run.step_exact || run.state == TrialState::kRunning ? "at" : "after";
}

bool ShowsStep(const SeedRun& run) { return run.step >= 0 && run.state != TrialState::kSucceeded; }

// "1 diverged at step 140", "2 failed after steps 60, 80", "2 diverged (at step 140, after
// step 90)", "1 cancelled".
std::string GroupText(const std::vector<SeedRun>& runs) {
  std::string text = absl::StrCat(runs.size(), " ", Word(runs.front().state));
  std::vector<const SeedRun*> stepped;
  for (const SeedRun& run : runs) {
    if (ShowsStep(run)) stepped.push_back(&run);
  }
  if (stepped.empty()) return text;
  const bool alike = stepped.size() == runs.size() &&
                     std::all_of(stepped.begin(), stepped.end(), [&](const SeedRun* run) {
                       return Preposition(*run) == Preposition(*stepped.front());
                     });
  if (alike) {
    std::vector<int64_t> steps;
    for (const SeedRun* run : stepped) steps.push_back(run->step);
    std::sort(steps.begin(), steps.end());
    steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
    return absl::StrCat(text, " ", Preposition(*stepped.front()),
                        steps.size() == 1 ? " step " : " steps ", absl::StrJoin(steps, ", "));
  }
  std::vector<std::string> parts;
  for (const SeedRun* run : stepped) {
    parts.push_back(absl::StrCat(Preposition(*run), " step ", run->step));
  }
  return absl::StrCat(text, " (", absl::StrJoin(parts, ", "), ")");
}

// "diverged at step 140", "failed", "without a value" for one run.
std::string RunText(const SeedRun& run) {
  std::string text = Word(run.state);
  if (ShowsStep(run)) absl::StrAppend(&text, " ", Preposition(run), " step ", run.step);
  return text;
}

}  // namespace

SeedAccount AccountSeeds(const std::vector<SeedRun>& runs, const std::vector<int64_t>& counted) {
  SeedAccount account;
  account.counted = static_cast<int>(counted.size());
  std::map<int64_t, SeedRun> lost;  // seed -> the trial that tells it
  for (const SeedRun& run : runs) {
    if (std::find(counted.begin(), counted.end(), run.seed) != counted.end()) continue;
    auto [it, inserted] = lost.emplace(run.seed, run);
    const auto before = [](const SeedRun& a, const SeedRun& b) {
      return std::make_pair(LossRank(a.state), a.trial_id) <
             std::make_pair(LossRank(b.state), b.trial_id);
    };
    if (!inserted && before(run, it->second)) it->second = run;
  }
  for (const auto& [seed, run] : lost) account.lost.push_back(run);
  return account;
}

std::string SeedCountText(const SeedAccount& account) {
  if (account.lost.empty()) return absl::StrCat("(", account.counted, ")");
  std::vector<SeedRun> runs = account.lost;
  std::stable_sort(runs.begin(), runs.end(), [](const SeedRun& a, const SeedRun& b) {
    return LossRank(a.state) < LossRank(b.state);
  });
  std::vector<std::string> groups;
  for (size_t i = 0; i < runs.size();) {
    size_t end = i;
    while (end < runs.size() && runs[end].state == runs[i].state) ++end;
    groups.push_back(GroupText({runs.begin() + i, runs.begin() + end}));
    i = end;
  }
  return absl::StrCat("(", account.counted, " of ", account.total(), "; ",
                      absl::StrJoin(groups, ", "), ")");
}

std::string LostSeedsText(const SeedAccount& account) {
  std::vector<std::string> parts;
  for (const SeedRun& run : account.lost) {
    parts.push_back(absl::StrCat("seed ", run.seed, " (trial ", run.trial_id, ") ", RunText(run)));
  }
  return absl::StrJoin(parts, "; ");
}

std::string LostSeedsNote(const std::string& where, const SeedAccount& account) {
  return absl::StrCat(where, ": ", account.counted, " of ", account.total(), " seeds counted; ",
                      LostSeedsText(account));
}

bool DaggerLossyMarks(const std::set<std::pair<size_t, size_t>>& lost, Table* table) {
  bool any = false;
  for (const auto& cell : lost) {
    if (!table->IsBest(cell.first, cell.second) && !table->IsSecond(cell.first, cell.second)) {
      continue;
    }
    table->rows[cell.first][cell.second] += " †";
    any = true;
  }
  return any;
}

}  // namespace spheret::client
