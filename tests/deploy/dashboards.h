// Test helpers: the PromQL expressions of the Grafana dashboards in deploy/grafana/dashboards/,
// with Grafana's variables substituted so that Prometheus can run them.
#pragma once

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace spheret::testing_util {

struct DashboardQuery {
  std::string dashboard;  // file name
  std::string where;      // panel title, or "variable NAME"
  std::string expr;       // as written in the dashboard
};

inline std::string ReadText(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

inline nlohmann::json ReadJsonFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
}

inline std::vector<std::filesystem::path> DashboardFiles(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Every panel target's `expr` and every query variable's query.
inline std::vector<DashboardQuery> DashboardQueries(const std::filesystem::path& dir) {
  std::vector<DashboardQuery> queries;
  for (const auto& file : DashboardFiles(dir)) {
    const nlohmann::json dashboard = ReadJsonFile(file);
    if (!dashboard.is_object()) continue;
    for (const auto& panel : dashboard.value("panels", nlohmann::json::array())) {
      for (const auto& target : panel.value("targets", nlohmann::json::array())) {
        if (target.contains("expr")) {
          queries.push_back({file.filename().string(), panel.value("title", "?"),
                             target["expr"].get<std::string>()});
        }
      }
    }
    const auto variables = dashboard.value("templating", nlohmann::json::object())
                               .value("list", nlohmann::json::array());
    for (const auto& variable : variables) {
      if (variable.value("type", "") != "query") continue;
      const nlohmann::json& query = variable["query"];
      queries.push_back({file.filename().string(), "variable " + variable.value("name", "?"),
                         query.is_string() ? query.get<std::string>() : query.value("query", "")});
    }
  }
  return queries;
}

// Grafana's `label_values(EXPR, LABEL)` as PromQL, `$var`/`${var}` as ".*" (every value), and
// the interval variables as `interval`.
inline std::string ToPromQl(const std::string& expr, const std::string& interval = "30s") {
  std::string promql = expr;
  const std::regex label_values(R"(^label_values\((.*),\s*([A-Za-z_][A-Za-z0-9_]*)\)$)");
  std::smatch match;
  if (std::regex_match(promql, match, label_values)) {
    promql = "group by (" + match[2].str() + ") (" + match[1].str() + ")";
  }
  promql = std::regex_replace(promql, std::regex(R"(\$\{?__(rate_)?interval\}?)"), interval);
  promql = std::regex_replace(promql, std::regex(R"(\$\{?[A-Za-z_][A-Za-z0-9_]*\}?)"), ".*");
  return promql;
}

}  // namespace spheret::testing_util
