// The rows that the claims compare (claims.h): trials grouped by column (data set and scale) and
// effective config, labelled, and which rows play a claim's roles and pair. Internal to
// client/report. Pure.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "client/report/claims.h"

namespace spheret::client::claim_rows {

// A row: the trials of one column whose effective configs are equal but for the seed.
struct Row {
  std::string label;  // `pre_ln`, `p_spheret p=1 scalenorm=off`, `geonorm [sweep-b]`
  std::string column;
  nlohmann::json config;       // the effective config of its trials (their seeds aside)
  std::vector<size_t> trials;  // indices into the claim trials, in seed order
};

struct Rows {
  std::vector<int64_t> seeds;  // of each claim trial (its effective config's)
  std::vector<Row> rows;       // by column, then the paper's method order, p and label
};

// Groups the trials into rows. Labels: the method (and p), then each key whose value differs
// between rows of the same method and p in the column; a config repeated in several sweeps with
// a seed in common stays one row per sweep, "[sweep]" after its label (repeats are not seeds).
Rows BuildRows(const std::vector<ClaimTrial>& trials);

// Whether a row's effective config plays `role`.
bool Plays(const RowRole& role, const nlohmann::json& config);

// Whether A row `a` meets B row `b` under the claim's pairing (claims.h, Pairing).
bool Pairs(const Claim& claim, const Row& a, const Row& b);

}  // namespace spheret::client::claim_rows
