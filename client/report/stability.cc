#include "client/report/stability.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "protocol/metric_catalog.h"

namespace spheret::client {
namespace {

std::vector<const SeedRun*> Diverged(const std::vector<SeedRun>& runs) {
  std::vector<const SeedRun*> diverged;
  for (const SeedRun& run : runs) {
    if (run.state == TrialState::kDiverged) diverged.push_back(&run);
  }
  return diverged;
}

// "140, 152" (a step not known as "?").
std::string DivergedSteps(const std::vector<const SeedRun*>& diverged) {
  std::vector<std::string> steps;
  for (const SeedRun* run : diverged) {
    steps.push_back(run->step >= 0 ? std::to_string(run->step) : "?");
  }
  return absl::StrJoin(steps, ", ");
}

// "keel: diverged 2 of 6 (S 1 of 3, M 1 of 3)" over the row's scales in table order.
std::string RowTotal(const ResultTable& spikes, const ResultRowKey& row) {
  size_t diverged = 0, total = 0;
  std::vector<std::string> parts;
  const auto& by_scale = spikes.runs.at(row.label);
  for (const std::string& scale : spikes.scales) {
    auto runs = by_scale.find(scale);
    if (runs == by_scale.end()) continue;
    const size_t here = Diverged(runs->second).size();
    diverged += here;
    total += runs->second.size();
    if (here > 0) parts.push_back(absl::StrCat(scale, " ", here, " of ", runs->second.size()));
  }
  return absl::StrCat(row.label, ": diverged ", diverged, " of ", total,
                      parts.empty() ? "" : " (" + absl::StrJoin(parts, ", ") + ")");
}

const Aggregate* SpikesOf(const ResultTable& spikes, const std::string& row,
                          const std::string& scale) {
  auto by_row = spikes.cells.find(row);
  if (by_row == spikes.cells.end()) return nullptr;
  auto by_scale = by_row->second.find(scale);
  if (by_scale == by_row->second.end() || by_scale->second.empty()) return nullptr;
  return &by_scale->second.begin()->second;
}

// "1.3 ± 0.6 [..] (3)" as the results tables print a cell.
std::string SpikesText(const Aggregate* cell, int decimals) {
  if (cell == nullptr || cell->n == 0) {
    return cell == nullptr ? "—" : "— " + SeedCountText(cell->seeds);
  }
  std::string text = FormatNumber(cell->mean, decimals);
  if (cell->n > 1) absl::StrAppend(&text, " ± ", FormatNumber(cell->std, decimals));
  return absl::StrCat(text, " ", SeedCountText(cell->seeds));
}

}  // namespace

std::string DivergedText(const std::vector<SeedRun>& runs) {
  const std::vector<const SeedRun*> diverged = Diverged(runs);
  std::string text = absl::StrCat(diverged.size(), " of ", runs.size());
  if (diverged.empty()) return text;
  return absl::StrCat(text, " (at step", diverged.size() > 1 ? "s " : " ", DivergedSteps(diverged),
                      ")");
}

Table StabilityTable(const ResultTable& spikes, bool exact, int decimals) {
  Table table;
  if (exact) {
    table.header = {"row",     "method",         "p",           "scale",      "diverged",
                    "n_total", "diverged_steps", "spikes_mean", "spikes_std", "spikes_n",
                    "left_out"};
    table.numeric = {false, false, true, false, true, true, false, true, true, true, false};
  } else {
    table.header = {"method", "scale", "diverged", "loss spikes"};
  }
  for (const ResultRowKey& row : spikes.rows) {
    for (const std::string& scale : spikes.scales) {
      auto runs = spikes.runs.at(row.label).find(scale);
      if (runs == spikes.runs.at(row.label).end()) continue;
      const Aggregate* cell = SpikesOf(spikes, row.label, scale);
      if (!exact) {
        table.rows.push_back(
            {row.label, scale, DivergedText(runs->second), SpikesText(cell, decimals)});
        continue;
      }
      const std::vector<const SeedRun*> diverged = Diverged(runs->second);
      const bool known = cell != nullptr && cell->n > 0;
      table.rows.push_back({row.label, row.method, row.p ? ExactNumber(*row.p) : "", scale,
                            std::to_string(diverged.size()), std::to_string(runs->second.size()),
                            DivergedSteps(diverged), known ? ExactNumber(cell->mean) : "",
                            known ? ExactNumber(cell->std) : "",
                            known ? std::to_string(cell->n) : "0",
                            cell != nullptr ? LostSeedsText(cell->seeds) : ""});
    }
  }
  if (!exact) {
    table.notes.push_back(
        "Diverged: the trials whose loss diverged of the trials run (the step each diverged at); "
        "loss spikes: mean ± std (counted of run seeds) over SUCCEEDED trials. Per row over every "
        "scale:");
    for (const ResultRowKey& row : spikes.rows) table.notes.push_back(RowTotal(spikes, row));
  }
  return table;
}

std::vector<std::string> UnstableRuns(const std::vector<TrialResult>& trials, double margin) {
  std::vector<TrialConfig> configs;
  for (const TrialResult& trial : trials) configs.push_back(trial.config);
  const std::vector<TrialCell> cells = CellsOf(configs);
  std::map<std::string, std::vector<double>> finals;  // column -> final train losses
  const auto final_loss = [](const TrialResult& trial) {
    auto found = trial.values.find(protocol::kTrainLossAvg);
    return found == trial.values.end() ? std::nan("") : found->second;
  };
  for (size_t i = 0; i < trials.size(); ++i) {
    if (trials[i].state == TrialState::kSucceeded && std::isfinite(final_loss(trials[i])))
      finals[cells[i].scale].push_back(final_loss(trials[i]));
  }
  std::vector<std::string> lines;
  for (size_t i = 0; i < trials.size(); ++i) {
    const TrialResult& trial = trials[i];
    if (trial.state != TrialState::kSucceeded && trial.state != TrialState::kDiverged) continue;
    std::ostringstream line;
    line << "trial " << trial.trial_id << ", " << cells[i].row.label << " at " << cells[i].scale;
    auto spikes = trial.values.find(protocol::kTrainLossSpikes);
    const std::string spike_note =
        spikes == trial.values.end() ? "" : "; " + FormatP(spikes->second) + " loss spikes";
    if (trial.state == TrialState::kDiverged) {
      const std::string at =
          trial.stop_step < 0
              ? ""
              : absl::StrCat(trial.stop_step_exact ? " at step " : " after step ", trial.stop_step);
      lines.push_back(line.str() + ": diverged" + at + spike_note);
      continue;
    }
    std::vector<double> column = finals[cells[i].scale];
    const double loss = final_loss(trial);
    if (column.size() < 2 || !std::isfinite(loss)) continue;
    std::sort(column.begin(), column.end());
    const size_t n = column.size();
    const double median = n % 2 ? column[n / 2] : (column[n / 2 - 1] + column[n / 2]) / 2;
    if (loss - median > margin) {
      lines.push_back(line.str() + ": final train loss " + FormatNumber(loss, 3) + ", " +
                      FormatNumber(loss - median, 3) + " above the median " +
                      FormatNumber(median, 3) + " of its scale" + spike_note);
    }
  }
  return lines;
}

}  // namespace spheret::client
