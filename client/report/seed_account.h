// The seeds a cell of a table or figure leaves out, and the words every output uses for them: a
// mean over fewer seeds than were run always says so, in the cell ("2 of 3; 1 diverged at step
// 140"), in a note under the table and as CSV/JSON fields. Pure: no I/O.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "client/report/table.h"
#include "protocol/trial_states.h"

namespace spheret::client {

// One trial of a cell as the accounting sees it.
struct SeedRun {
  int64_t trial_id = 0;
  int64_t seed = 0;
  TrialState state = TrialState::kPending;  // kSucceeded for a finished trial without the value
  int64_t step = -1;        // where it stopped (TrialResult::stop_step), -1 when unknown
  bool step_exact = false;  // `step` is the step its loss diverged at (not the last one logged)
};

// A cell's seeds: how many its numbers count, and each seed they leave out (no trial of that
// seed counted), by seed.
struct SeedAccount {
  int counted = 0;
  std::vector<SeedRun> lost;
  int total() const { return counted + static_cast<int>(lost.size()); }
};

// The account of a cell from all its trials (`runs`, any order) and the seeds that have a counted
// value (each counted value once in `counted`, which may repeat a seed: two sweeps of one seed
// give two values). A seed with no counted value is lost, told by one of its trials: the one
// that diverged, else failed, cancelled, pruned, running, pending, else the finished one without
// the value.
SeedAccount AccountSeeds(const std::vector<SeedRun>& runs, const std::vector<int64_t>& counted);

// "(3)" when nothing is lost; "(2 of 3; 1 diverged at step 140)",
// "(1 of 3; 1 diverged at step 140, 1 failed after step 60)", "(0 of 3; 3 failed after step 10)"
// (each step once) otherwise.
std::string SeedCountText(const SeedAccount& account);
// "seed 1339 (trial 12) diverged at step 140; seed 1340 (trial 13) failed after step 60", "" when
// nothing is lost: the CSV/JSON `left_out` field and the notes' list.
std::string LostSeedsText(const SeedAccount& account);

// A note under a table for a cell (or a group of cells) that lost seeds: "WHERE: 2 of 3 seeds
// counted; seed 1339 (trial 12) diverged at step 140".
std::string LostSeedsNote(const std::string& where, const SeedAccount& account);

// Best/second marks on cells that lost seeds: appends " †" to each such marked cell of `table`
// (`lost`: the (row, column) of every cell that lost seeds) and returns whether any was.
bool DaggerLossyMarks(const std::set<std::pair<size_t, size_t>>& lost, Table* table);
// The note that explains the dagger.
inline constexpr char kDaggerNote[] =
    "† marked although the cell left seeds out: its mean is over the seeds that finished, which "
    "can rank it above where all its seeds would.";

}  // namespace spheret::client
