// The rules of a diag row, as the worker checks a trainer's line and the coordinator a received
// row: bounded layers per sublayer, plain short field names, at most 64 unique fields.
#include "protocol/diag_values.h"

#include <gtest/gtest.h>

#include <string>

namespace spheret::protocol {
namespace {

TEST(DiagValuesTest, FieldNamesAreOneToFortyOfLowercaseDigitsAndUnderscore) {
  for (const char* good : {"theta", "jac_sigma_max", "e2e_sigma_min", "_", "a0"}) {
    EXPECT_TRUE(IsDiagFieldName(good)) << good;
  }
  EXPECT_TRUE(IsDiagFieldName(std::string(40, 'x')));
  for (const char* bad : {"", "Theta", "theta/1", "diag/theta/1/attn", "θ", "a b", "a-b", "a.b"}) {
    EXPECT_FALSE(IsDiagFieldName(bad)) << bad;
  }
  EXPECT_FALSE(IsDiagFieldName(std::string(41, 'x')));
  EXPECT_FALSE(IsDiagFieldName(std::string("a\0b", 3)));
}

// Every one-sided value and every bound says so; a plain measurement needs no word.
TEST(DiagValuesTest, EstimatesAndBoundsSayWhatTheyAre) {
  for (const char* field :
       {"jac_sigma_min_upper", "e2e_sigma_min_upper", "jac_bound_max", "bound_max"}) {
    EXPECT_NE(std::string(DiagFieldReading(field)).find("upper bound"), std::string::npos) << field;
  }
  for (const char* field :
       {"jac_sigma_min_lower", "e2e_sigma_min_lower", "jac_bound_min", "bound_min"}) {
    EXPECT_NE(std::string(DiagFieldReading(field)).find("lower bound"), std::string::npos) << field;
  }
  for (const char* field : {"jac_sigma_max", "e2e_sigma_max", "jac_sigma_min", "e2e_sigma_min"}) {
    EXPECT_NE(std::string(DiagFieldReading(field)).find("estimate"), std::string::npos) << field;
  }
  EXPECT_EQ(DiagFieldReading("theta"), "");
  EXPECT_EQ(DiagFieldReading("hidden_norm"), "");
}

TEST(DiagValuesTest, EachSublayerAdmitsItsLayers) {
  const DiagValues one = {{"theta", 0.1}};
  for (const char* sublayer : {"attn", "mlp"}) {
    EXPECT_EQ(DiagRowError(1, sublayer, one), "");
    EXPECT_EQ(DiagRowError(4096, sublayer, one), "");
    EXPECT_NE(DiagRowError(0, sublayer, one), "");
    EXPECT_NE(DiagRowError(4097, sublayer, one), "");
  }
  EXPECT_EQ(DiagRowError(0, "model", one), "");
  EXPECT_EQ(DiagRowError(-1, "model", one), "field 'layer' must be 0 for sublayer model, got -1");
  EXPECT_EQ(DiagRowError(8192, "dyadic", one), "");
  EXPECT_NE(DiagRowError(8193, "dyadic", one), "");
  EXPECT_EQ(DiagRowError(1, "ffn", one),
            "field 'sublayer' must be attn, mlp, model or dyadic, got \"ffn\"");
  EXPECT_EQ(DiagRowError(1, "", one),
            "field 'sublayer' must be attn, mlp, model or dyadic, got \"\"");
}

TEST(DiagValuesTest, ValuesAreUniqueAndAtMostSixtyFour) {
  DiagValues values;
  for (int i = 0; i < 64; ++i) values.emplace_back("f" + std::to_string(i), i);
  EXPECT_EQ(DiagRowError(1, "attn", values), "");
  values.emplace_back("f64", 64);
  EXPECT_EQ(DiagRowError(1, "attn", values), "field 'values' has 65 fields, at most 64");
  EXPECT_EQ(DiagRowError(1, "attn", {{"theta", 1}, {"alpha", 2}, {"theta", 3}}),
            "field 'values' names 'theta' twice");
  EXPECT_EQ(DiagRowError(1, "attn", {}), "") << "a row may carry no value";
  EXPECT_EQ(DiagRowError(1, "attn", {{std::string("a\nb"), 1}}),
            "field 'values' has a field name that is not 1 to 40 of [a-z0-9_]: \"a\\x0ab\"");
}

}  // namespace
}  // namespace spheret::protocol
