// Reads cases as JSON on stdin and prints client/report/stats.h's figures for each, for
// stats_scipy_test.py to hold against scipy.stats. A case: {"kind": "describe", "a": [...]},
// {"kind": "paired" | "welch", "a": [...], "b": [...]}, or {"kind": "seeds", "a": [...],
// "b": [...], "seeds_a": [...], "seeds_b": [...]} (CompareOverSeeds).
#include <iostream>

#include "client/report/stats.h"
#include "nlohmann/json.hpp"

using spheret::client::Difference;
using nlohmann::json;

namespace {

// NaN has no JSON form: null.
json Number(double value) { return std::isnan(value) ? json(nullptr) : json(value); }

json DifferenceJson(const Difference& d) {
  return {{"paired", d.paired}, {"mean", Number(d.mean)},     {"ci_low", Number(d.ci_low)},
          {"ci_high", Number(d.ci_high)}, {"t", Number(d.t)}, {"df", Number(d.df)},
          {"p", Number(d.p)},     {"includes_zero", d.IncludesZero()}};
}

json Run(const json& c) {
  const auto a = c.at("a").get<std::vector<double>>();
  const std::string kind = c.at("kind");
  if (kind == "describe") {
    const spheret::client::Description d = spheret::client::Describe(a);
    return {{"n", d.n},
            {"mean", Number(d.mean)},
            {"std", Number(d.std)},
            {"ci_low", Number(d.ci_low)},
            {"ci_high", Number(d.ci_high)}};
  }
  const auto b = c.at("b").get<std::vector<double>>();
  if (kind == "paired") return DifferenceJson(spheret::client::PairedDifference(a, b));
  if (kind == "welch") return DifferenceJson(spheret::client::WelchDifference(a, b));
  spheret::client::SeedValues sa{c.at("seeds_a").get<std::vector<int64_t>>(), a};
  spheret::client::SeedValues sb{c.at("seeds_b").get<std::vector<int64_t>>(), b};
  return DifferenceJson(spheret::client::CompareOverSeeds(sa, sb));
}

}  // namespace

int main() {
  json out = json::array();
  for (const json& c : json::parse(std::cin)) out.push_back(Run(c));
  std::cout << out.dump() << "\n";
  return 0;
}
