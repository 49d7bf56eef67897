// Proposition 6's bounds beside what they bound (client/report/bounds.h), on diag series written
// here: the pairing of diag and jacobian steps, the ratios, the sigma_min interval, and the
// sentence that says when a bound says nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "client/report/bounds.h"

namespace spheret::client {
namespace {

using nlohmann::json;

TrialConfig Config(const std::string& method) {
  return TrialConfig(json{{"method", method}, {"scale", "xs"}}.dump());
}

// Trial 1 (geonorm): vacuous bounds as the issue found them at step 50 (exp(S) ~ 1e87, every
// m_l = 0), diag every 10 steps and Jacobians every 15, so they pair at 30, not at 45.
// Trial 2 (p_spheret): informative bounds. Trial 3 (pre_ln): no bounds. Trial 4 (geonorm): diag
// at 10 and 20, Jacobians at 15: no common step.
std::map<std::string, std::vector<DiagSeries>> Series() {
  const TrialConfig geo = Config("geonorm"), p = Config("p_spheret"), pre = Config("pre_ln");
  std::map<std::string, std::vector<DiagSeries>> by_field;
  by_field["bound_max"] = {{1, geo, 0, "model", {0, 10, 20, 30, 40}, {1, 2, 1e40, 1e87, 1e90}},
                           {2, p, 0, "model", {0, 30}, {1, 1.5}},
                           {4, geo, 0, "model", {10, 20}, {3, 4}}};
  by_field["bound_min"] = {{1, geo, 0, "model", {0, 10, 20, 30, 40}, {1, 0.5, 0, 0, 0}},
                           {2, p, 0, "model", {0, 30}, {1, 0.1}},
                           {4, geo, 0, "model", {10, 20}, {0.1, 0.1}}};
  by_field["e2e_sigma_max"] = {{1, geo, 0, "model", {0, 15, 30, 45}, {1, 1.01, 1.01, 1.02}},
                               {2, p, 0, "model", {0, 30}, {1, 1.2}},
                               {3, pre, 0, "model", {30}, {7.5}},
                               {4, geo, 0, "model", {15}, {1.1}}};
  by_field["e2e_sigma_min_upper"] = {{1, geo, 0, "model", {0, 15, 30, 45}, {1, 1, 4.7e-4, 1e-3}},
                                     {2, p, 0, "model", {0, 30}, {1, 0.2}},
                                     {3, pre, 0, "model", {30}, {0.5}},
                                     {4, geo, 0, "model", {15}, {0.3}}};
  by_field["e2e_sigma_min_lower"] = {{1, geo, 0, "model", {0, 15, 30, 45}, {0, 0, 0, 0}},
                                     {2, p, 0, "model", {0, 30}, {1, 0.2}},
                                     {3, pre, 0, "model", {30}, {0}},
                                     {4, geo, 0, "model", {15}, {0}}};
  by_field["jac_sigma_max"] = {{1, geo, 1, "attn", {30, 45}, {1.2, 1.5}},
                               {1, geo, 1, "mlp", {30, 45}, {1.1, 1.1}}};
  by_field["jac_bound_max"] = {{1, geo, 1, "attn", {30, 45}, {50, 60}},
                               {1, geo, 1, "mlp", {30, 45}, {3.3, 2.2}}};
  by_field["jac_bound_min"] = {{1, geo, 1, "attn", {30, 45}, {0, 0}},
                               {1, geo, 1, "mlp", {30, 45}, {0.2, 0.3}}};
  return by_field;
}

size_t Column(const Table& table, const std::string& name) {
  for (size_t i = 0; i < table.header.size(); ++i) {
    if (table.header[i] == name) return i;
  }
  ADD_FAILURE() << "no column " << name;
  return 0;
}

TEST(Bounds, EachBoundBesideWhatItBoundsWithItsRatioAndWhetherItSaysAnything) {
  const Table table = BoundsTable(Series(), /*exact=*/false);
  ASSERT_EQ(table.rows.size(), 4u);
  const auto cell = [&](size_t row, const std::string& column) {
    return table.rows[row][Column(table, column)];
  };
  // Trial 1: paired at 30 (the last step with both), per update at 45.
  EXPECT_EQ(cell(0, "trial"), "1");
  EXPECT_EQ(cell(0, "row"), "geonorm");
  EXPECT_EQ(cell(0, "step"), "30");
  EXPECT_EQ(cell(0, "sigma_max(G) (lower estimate)"), "1.01");
  EXPECT_EQ(cell(0, "exp(sum Delta) (upper bound)"), "1e+87");
  EXPECT_EQ(cell(0, "exp(sum Delta) / sigma_max(G)"), "9.9e+86");
  EXPECT_EQ(cell(0, "sigma_min(G) lower bound"), "0");
  EXPECT_EQ(cell(0, "sigma_min(G) upper bound"), "0.00047");
  EXPECT_EQ(cell(0, "prod m_l (lower bound)"), "0");
  EXPECT_EQ(cell(0, "sigma_min(G) upper / prod m_l"), "") << "no ratio to 0";
  EXPECT_EQ(cell(0, "jacobian step"), "45");
  EXPECT_EQ(cell(0, "max (1 + Delta_l) / sigma_max(J_l)"), "40") << "60 / 1.5";
  EXPECT_EQ(cell(0, "updates with m_l = 0"), "1 of 2");
  EXPECT_EQ(cell(0, "what the bounds say"),
            "exp(sum Delta) is 9.9e+86 times sigma_max(G): says nothing; prod m_l = 0: says "
            "nothing; sigma_min(G) <= 0.00047 (an upper bound; no lower bound certified)");
  // Trial 2: both bounds informative; sigma_min certified.
  EXPECT_EQ(cell(1, "exp(sum Delta) / sigma_max(G)"), "1.25");
  EXPECT_EQ(cell(1, "sigma_min(G) upper / prod m_l"), "2");
  EXPECT_EQ(cell(1, "what the bounds say"),
            "exp(sum Delta) is within 1.25 times sigma_max(G); prod m_l is within 2 of "
            "sigma_min(G)");
  // Trial 3: no bounds to compare; trial 4: no step with both.
  EXPECT_EQ(cell(2, "what the bounds say"),
            "no Proposition 6 bounds (sphere methods only); sigma_min(G) <= 0.5 (an upper bound; "
            "no lower bound certified)");
  EXPECT_EQ(cell(3, "exp(sum Delta) (upper bound)"), "");
  EXPECT_EQ(cell(3, "step"), "15");
  EXPECT_NE(cell(3, "what the bounds say").find("no step logged both sigma(G) and the bounds"),
            std::string::npos);
  ASSERT_EQ(table.notes.size(), 2u);
  EXPECT_NE(table.notes[0].find("diag_interval"), std::string::npos);
  EXPECT_NE(table.notes[1].find("says nothing"), std::string::npos);
}

TEST(Bounds, MachineReadableAtFullPrecisionAndOlderRunsReadAsUpperEstimates) {
  std::map<std::string, std::vector<DiagSeries>> by_field = Series();
  const Table exact = BoundsTable(by_field, /*exact=*/true);
  EXPECT_EQ(std::stod(exact.rows[0][Column(exact, "exp(sum Delta) / sigma_max(G)")]), 1e87 / 1.01);
  const BoundsTables both = BoundsTablesOf(by_field);  // one index, both tables
  EXPECT_EQ(Render(both.exact, Format::kCsv), Render(exact, Format::kCsv));
  EXPECT_EQ(Render(both.shown, Format::kCsv),
            Render(BoundsTable(by_field, /*exact=*/false), Format::kCsv));
  by_field["theta"] = {{1, Config("geonorm"), 1, "attn", {10, 20}, {0.1, 0.2}}};  // not read
  EXPECT_EQ(Render(BoundsTable(by_field, /*exact=*/true), Format::kCsv),
            Render(exact, Format::kCsv));
  by_field.erase("theta");
  // A run before the fp64 interval: e2e_sigma_min only, never shown as a bound.
  by_field.erase("e2e_sigma_min_upper");
  by_field.erase("e2e_sigma_min_lower");
  by_field["e2e_sigma_min"] = {{1, Config("geonorm"), 0, "model", {30}, {0.0}}};
  const Table old = BoundsTable(by_field, /*exact=*/false);
  EXPECT_EQ(old.rows[0][Column(old, "sigma_min(G) upper bound")], "");
  EXPECT_EQ(old.rows[0][Column(old, "sigma_min(G) lower bound")], "");
  EXPECT_NE(old.rows[0][Column(old, "what the bounds say")].find(
                "sigma_min(G) read 0, an uncertified fp32 upper estimate that may read 0"),
            std::string::npos);
}

// The fields a report fetches are the catalog's exported diag fields, in the order the report
// always listed them (the legacy ones last).
TEST(Geometry, DiagFieldsAreTheCatalogsExportedFieldsInTheReportsOrder) {
  EXPECT_EQ(DiagFields(), (std::vector<std::string>{"hidden_norm",
                                                    "theta",
                                                    "theta2",
                                                    "at_cap",
                                                    "alpha",
                                                    "radial",
                                                    "token_cos",
                                                    "eff_rank",
                                                    "b_norm",
                                                    "eta",
                                                    "delta",
                                                    "margin",
                                                    "gate_choice",
                                                    "gate_prob",
                                                    "jac_sigma_max",
                                                    "jac_sigma_min_upper",
                                                    "jac_sigma_min_lower",
                                                    "jac_bound_max",
                                                    "jac_bound_min",
                                                    "delta_sum",
                                                    "theta2_sum",
                                                    "bound_max",
                                                    "bound_min",
                                                    "e2e_sigma_max",
                                                    "e2e_sigma_min_upper",
                                                    "e2e_sigma_min_lower",
                                                    "theta2_budget",
                                                    "jac_sigma_min",
                                                    "e2e_sigma_min"}));
}

TEST(Bounds, NoRowWithoutTheEndToEndJacobian) {
  std::map<std::string, std::vector<DiagSeries>> by_field;
  by_field["bound_max"] = {{1, Config("geonorm"), 0, "model", {0}, {2.0}}};
  EXPECT_TRUE(BoundsTable(by_field, false).rows.empty());
}

}  // namespace
}  // namespace spheret::client
