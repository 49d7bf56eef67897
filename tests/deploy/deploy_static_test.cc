// deploy/: the Grafana dashboards reference the provisioned datasource, define every variable
// they use, have unique uids and name only metrics the services export; every alert rule has a
// promtool unit test that makes it fire.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "protocol/metric_catalog.h"
#include "tests/deploy/dashboards.h"

namespace spheret {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing_util::DashboardFiles;
using testing_util::DashboardQueries;
using testing_util::ReadJsonFile;
using testing_util::ReadText;

const fs::path kSource = SPHERET_SOURCE_DIR;
const fs::path kDashboards = kSource / "deploy/grafana/dashboards";

// Metric names the coordinator and the worker register (histograms add their series suffixes).
std::set<std::string> ExportedNames() {
  std::set<std::string> names = {"up"};
  for (const char* file : {"server/metrics/metrics.cc", "worker/daemon/worker_metrics.cc"}) {
    const std::string text = ReadText(kSource / file);
    const std::regex literal("\"(spheret_[a-z_]+)\"");
    for (std::sregex_iterator it(text.begin(), text.end(), literal), end; it != end; ++it) {
      names.insert((*it)[1].str());
    }
  }
  for (const char* histogram : {"spheret_schedule_latency_seconds", "spheret_db_commit_seconds"}) {
    EXPECT_TRUE(names.count(histogram)) << histogram;
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      names.insert(std::string(histogram) + suffix);
    }
  }
  return names;
}

std::string ProvisionedUid() {
  const YAML::Node file =
      YAML::LoadFile((kSource / "deploy/grafana/provisioning/datasources/spheret.yml").string());
  return file["datasources"][0]["uid"].as<std::string>();
}

// Every "datasource" object anywhere in `node`.
void CollectDatasources(const json& node, std::vector<json>* found) {
  if (node.is_object()) {
    for (auto it = node.begin(); it != node.end(); ++it) {
      if (it.key() == "datasource") found->push_back(it.value());
      CollectDatasources(it.value(), found);
    }
  } else if (node.is_array()) {
    for (const json& item : node) CollectDatasources(item, found);
  }
}

TEST(Dashboards, ParseAndHaveUniqueUidsAndPanelIds) {
  const auto files = DashboardFiles(kDashboards);
  ASSERT_GE(files.size(), 3u);
  std::set<std::string> uids;
  for (const fs::path& file : files) {
    const json dashboard = ReadJsonFile(file);
    ASSERT_TRUE(dashboard.is_object()) << file << " is not valid JSON";
    const std::string uid = dashboard.value("uid", "");
    EXPECT_FALSE(uid.empty()) << file;
    EXPECT_TRUE(uids.insert(uid).second) << "uid " << uid << " appears twice";
    std::set<int> ids;
    for (const json& panel : dashboard["panels"]) {
      EXPECT_TRUE(ids.insert(panel["id"].get<int>()).second) << file << ": panel id twice";
      EXPECT_FALSE(panel.value("targets", json::array()).empty()) << file << ": " << panel["title"];
    }
  }
}

TEST(Dashboards, ReferenceOnlyTheProvisionedDatasource) {
  const std::string uid = ProvisionedUid();
  for (const fs::path& file : DashboardFiles(kDashboards)) {
    std::vector<json> datasources;
    CollectDatasources(ReadJsonFile(file), &datasources);
    EXPECT_GT(datasources.size(), 0u) << file;
    for (const json& datasource : datasources) {
      ASSERT_TRUE(datasource.is_object()) << file << ": " << datasource.dump();
      EXPECT_EQ(datasource.value("uid", ""), uid) << file;
      EXPECT_EQ(datasource.value("type", ""), "prometheus") << file;
    }
  }
}

TEST(Dashboards, EveryVariableUsedIsDefined) {
  const std::set<std::string> builtin = {"__rate_interval", "__interval", "__range", "__all"};
  const std::regex use(R"(\$\{?([A-Za-z_][A-Za-z0-9_]*))");
  for (const fs::path& file : DashboardFiles(kDashboards)) {
    const json dashboard = ReadJsonFile(file);
    std::set<std::string> defined;
    for (const json& variable : dashboard["templating"]["list"]) {
      defined.insert(variable["name"].get<std::string>());
    }
    const std::string text = dashboard["panels"].dump() + dashboard["templating"].dump();
    int uses = 0;
    for (std::sregex_iterator it(text.begin(), text.end(), use), end; it != end; ++it) {
      const std::string name = (*it)[1].str();
      ++uses;
      EXPECT_TRUE(defined.count(name) || builtin.count(name))
          << file.filename() << " uses $" << name << " but does not define it";
    }
    EXPECT_GT(uses, 0) << file;
  }
}

TEST(Dashboards, NameOnlyExportedMetrics) {
  const std::set<std::string> exported = ExportedNames();
  const std::regex metric(R"((spheret_[a-z_]+|\bup)\b)");
  int checked = 0;
  for (const auto& query : DashboardQueries(kDashboards)) {
    for (std::sregex_iterator it(query.expr.begin(), query.expr.end(), metric), end; it != end;
         ++it) {
      ++checked;
      EXPECT_TRUE(exported.count((*it)[1].str()))
          << query.dashboard << " / " << query.where << ": " << (*it)[1].str()
          << " is not exported by spheret-coordinator or spheret-worker";
    }
  }
  EXPECT_GT(checked, 20);
  // And the issue's panels are there.
  std::string all;
  for (const auto& query : DashboardQueries(kDashboards)) all += query.expr + "\n";
  for (const char* name :
       {"spheret_trials", "spheret_eval_jobs", "spheret_train_loss", "spheret_val_loss",
        "spheret_layer_value", "spheret_schedule_latency_seconds_bucket", "spheret_queue_depth",
        "spheret_worker_slots", "spheret_worker_spool_depth"}) {
    EXPECT_NE(all.find(name), std::string::npos) << name << " has no panel";
  }
  // Issue 26: the geometry dashboard's panels by field name.
  for (const char* field :
       {"hidden_norm", "theta", "delta", "margin", "token_cos", "eff_rank", "jac_sigma_max",
        "jac_bound_max", "gate_choice", "e2e_sigma_max", "bound_max"}) {
    EXPECT_NE(all.find("field=\"" + std::string(field) + "\""), std::string::npos)
        << field << " has no panel";
  }
}

// Issue 43: a singular value of a Jacobian is an estimate or a bound, and so is Proposition 6's
// bound: every target that draws one says which in its legend, and sigma_min(G) is drawn as its
// interval (both ends).
TEST(Dashboards, EstimatesAndBoundsSayWhatTheyAreInTheirLegends) {
  const json dashboard = ReadJsonFile(kDashboards / "spheret-geometry.json");
  const std::regex one_sided(R"re(field=\"([a-z0-9_]*(sigma|bound)[a-z0-9_]*)\")re");
  std::set<std::string> drawn;
  for (const json& panel : dashboard["panels"]) {
    for (const json& target : panel.value("targets", json::array())) {
      const std::string expr = target.value("expr", "");
      std::smatch match;
      if (!std::regex_search(expr, match, one_sided)) continue;
      drawn.insert(match[1].str());
      const std::string legend = target.value("legendFormat", "");
      EXPECT_TRUE(legend.find("estimate") != std::string::npos ||
                  legend.find("bound") != std::string::npos)
          << match[1].str() << " in '" << panel.value("title", "") << "': " << legend;
    }
  }
  for (const char* field : {"e2e_sigma_min_upper", "e2e_sigma_min_lower", "e2e_sigma_max",
                            "bound_max", "bound_min", "jac_sigma_max", "jac_bound_max"}) {
    EXPECT_TRUE(drawn.count(field)) << field << " has no panel";
  }
  EXPECT_FALSE(drawn.count("e2e_sigma_min")) << "the uncertified field is not drawn";
}

// Every field="..." a dashboard or an alert selects is one the coordinator exports (the metric
// catalog's exported diag fields, server/metrics/metrics.cc's ExportedLayerFields; any other never
// becomes a series), and every estimate or bound among them is drawn with the catalog's word.
TEST(Dashboards, SelectOnlyExportedLayerFields) {
  std::string text = ReadText(kSource / "deploy/prometheus/rules/alerts.yml");
  for (const auto& query : DashboardQueries(kDashboards)) text += query.expr + "\n";
  const std::regex field(R"re(field="([^"]*)")re");
  int checked = 0;
  for (std::sregex_iterator it(text.begin(), text.end(), field), end; it != end; ++it) {
    ++checked;
    const protocol::MetricInfo* info = protocol::FindMetric((*it)[1].str());
    EXPECT_TRUE(info != nullptr && info->level != protocol::Level::kStep && info->exported)
        << "field " << (*it)[1].str() << " is not exported";
  }
  EXPECT_GT(checked, 10);
}

TEST(AlertRules, EachAlertHasATestThatFiresIt) {
  const YAML::Node rules =
      YAML::LoadFile((kSource / "deploy/prometheus/rules/alerts.yml").string());
  std::set<std::string> fired;
  for (const char* file : {"alerts_test.yml", "token_collapse_test.yml"}) {
    const YAML::Node tests = YAML::LoadFile((kSource / "deploy/prometheus/tests" / file).string());
    for (const YAML::Node& test : tests["tests"]) {
      for (const YAML::Node& check : test["alert_rule_test"]) {
        if (check["exp_alerts"].size() > 0) fired.insert(check["alertname"].as<std::string>());
      }
    }
  }
  int alerts = 0;
  for (const YAML::Node& group : rules["groups"]) {
    for (const YAML::Node& rule : group["rules"]) {
      if (!rule["alert"]) continue;
      ++alerts;
      EXPECT_TRUE(fired.count(rule["alert"].as<std::string>()))
          << rule["alert"].as<std::string>() << " is never made to fire in deploy/prometheus/tests";
    }
  }
  EXPECT_GE(alerts, 4);
}

}  // namespace
}  // namespace spheret
