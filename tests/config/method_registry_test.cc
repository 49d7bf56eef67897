// The method registry (config/method_registry.h): one entry per Method value, the facts that
// the trainer and the reports read from it, and docs/methods.md's knob table kept equal to it.
#include "config/method_registry.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

namespace spheret {
namespace {

TEST(MethodRegistry, EveryMethodValueHasOneEntryAndItsIdRoundTrips) {
  std::set<std::string_view> ids;
  for (int value = 0; value <= static_cast<int>(Method::kScripted); ++value) {
    const Method method = static_cast<Method>(value);
    const MethodSpec& spec = SpecOf(method);
    EXPECT_EQ(spec.method, method);
    EXPECT_TRUE(ids.insert(spec.id).second) << spec.id << " twice";
    EXPECT_EQ(ParseMethod(spec.id), method) << spec.id;
    EXPECT_EQ(MethodId(method), spec.id);
    EXPECT_FALSE(spec.label.empty()) << spec.id;
    for (std::string_view knob : spec.knobs) {
      bool known = false;
      for (const KnobSpec& defined : ConnectionKnobs()) known = known || defined.name == knob;
      EXPECT_TRUE(known) << spec.id << " reads " << knob << ", which the knob table lacks";
    }
  }
  EXPECT_EQ(MethodRegistry().size(), ids.size());
  EXPECT_EQ(FindMethodSpec("no_such_method"), nullptr);
}

// The facts the code held before the registry, as literals: the registry must keep them.
TEST(MethodRegistry, KeepsThePapersFacts) {
  const std::vector<std::string> order = {"pre_ln",    "post_ln", "pre_dyt",      "peri_ln",
                                          "keel",      "geonorm", "proj_spheret", "cay_spheret",
                                          "p_spheret", "ngpt",    "autonorm",     "scripted"};
  const std::vector<std::string> ids = MethodIds();
  ASSERT_GE(ids.size(), order.size());
  EXPECT_EQ(std::vector<std::string>(ids.begin(), ids.begin() + order.size()), order)
      << "a method added later follows these";
  for (const std::string& id : order) {
    const Method method = *ParseMethod(id);
    const bool sphere =
        id == "geonorm" || id == "proj_spheret" || id == "cay_spheret" || id == "p_spheret";
    EXPECT_EQ(IsSphereMethod(method), sphere) << id;
    ConnectionOptions options;
    options.method = method;
    EXPECT_EQ(ScaleNormOn(options), sphere && id != "geonorm") << id;
    options.scalenorm = true;
    EXPECT_EQ(ScaleNormOn(options), sphere) << id << ": scalenorm on where a method has one";
    EXPECT_EQ(MethodReads(id, "p"), id == "p_spheret") << id;
    EXPECT_EQ(MethodRecords(id, "alpha"), sphere) << id;
    EXPECT_EQ(MethodRecords(id, "gate_choice"), id == "autonorm") << id;
    EXPECT_TRUE(MethodRecords(id, "hidden_norm")) << id;
  }
  EXPECT_TRUE(CapActs("geonorm", 1.0));
  EXPECT_TRUE(CapActs("cay_spheret", 1.0));
  EXPECT_FALSE(CapActs("proj_spheret", 4.0));
  EXPECT_FALSE(CapActs("p_spheret", 1.0));
  EXPECT_TRUE(CapActs("p_spheret", 2.0));
  EXPECT_FALSE(CapActs("pre_ln", 2.0));
  EXPECT_EQ(MethodsReading("p"), std::vector<std::string>{"p_spheret"});
}

TEST(MethodRegistry, ScriptedIsItsOwnFamilyWithGenericDiagnosticsOnly) {
  const MethodSpec& spec = SpecOf(Method::kScripted);
  EXPECT_EQ(spec.id, "scripted");
  EXPECT_EQ(spec.family, MethodFamily::kOther);
  EXPECT_EQ(spec.cap, CapRule::kNever);
  EXPECT_FALSE(spec.scalenorm_default);
  EXPECT_FALSE(spec.decays);
  EXPECT_TRUE(spec.paper_rows.empty());
  EXPECT_TRUE(MarksNotApplicable("scripted"));
  EXPECT_FALSE(MarksNotApplicable("pre_ln")) << "pre_ln's tables print — as before";
  for (const char* field : {"alpha", "theta2", "at_cap", "b_norm", "eta", "delta", "margin",
                            "min_abs_cos", "gate_choice", "gate_prob"}) {
    EXPECT_FALSE(MethodRecords("scripted", field)) << field;
  }
  for (const char* field :
       {"hidden_norm", "theta", "radial", "token_cos", "eff_rank", "jac_sigma_max"}) {
    EXPECT_TRUE(MethodRecords("scripted", field)) << field;
  }
}

TEST(MethodRegistry, RowMethodOfNamesAScriptedTrialByItsConnectionsStem) {
  using nlohmann::json;
  EXPECT_EQ(RowMethodOf(json{{"method", "geonorm"}}), "geonorm");
  EXPECT_EQ(RowMethodOf(json::object()), "pre_ln") << "the trainer's default method";
  EXPECT_EQ(RowMethodOf(json{{"method", "scripted"}, {"connection", "rezero.pt"}}),
            "scripted:rezero");
  EXPECT_EQ(
      RowMethodOf(json{{"method", "scripted"}, {"connection", "examples/connections/rezero.pt"}}),
      "scripted:rezero");
  EXPECT_EQ(RowMethodOf(json{{"method", "scripted"}, {"connection", "gated.pt"}}),
            "scripted:gated");
  // With its hash, each version of a file is a row of its own.
  const std::string v1(64, 'a'), v2 = "0123456789" + std::string(54, 'f');
  EXPECT_EQ(RowMethodOf(json{{"method", "scripted"},
                             {"connection", "examples/connections/rezero.pt"},
                             {"connection_sha256", v1}}),
            "scripted:rezero@aaaaaaaa");
  EXPECT_EQ(RowMethodOf(json{
                {"method", "scripted"}, {"connection", "rezero.pt"}, {"connection_sha256", v2}}),
            "scripted:rezero@01234567");
  EXPECT_EQ(RowMethodOf(json{{"method", "scripted"}}), "scripted") << "no file: the method alone";
  EXPECT_EQ(RowMethodOf(json{{"method", "pre_ln"}, {"connection", "x.pt"}}), "pre_ln");
}

// docs/methods.md's method and knob tables are the registry's, byte for byte.
TEST(MethodRegistry, DocsKnobTableIsTheRegistrys) {
  std::ifstream file(std::string(SPHERET_SOURCE_DIR) + "/docs/methods.md");
  ASSERT_TRUE(file) << "docs/methods.md not found under " << SPHERET_SOURCE_DIR;
  std::stringstream text;
  text << file.rdbuf();
  for (const std::string& table : {MethodTableMarkdown(), KnobTableMarkdown()}) {
    EXPECT_NE(text.str().find(table), std::string::npos)
        << "docs/methods.md's tables differ from config/method_registry.cc; paste this:\n"
        << table;
  }
}

}  // namespace
}  // namespace spheret
