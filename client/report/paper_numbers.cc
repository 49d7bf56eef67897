// The paper's published numbers: the embedded copy of reference/paper_tables.csv (generated
// paper_tables_data.cc), parsed, and looked up by our cells.
#include <map>
#include <set>

#include "absl/strings/str_split.h"
#include "client/report/paper_tables.h"
#include "client/report/results.h"
#include "config/method_registry.h"

namespace spheret::client {

const char* PaperTablesCsv();

const PaperNumbers& PaperNumbers::Embedded() {
  static const PaperNumbers numbers = Parse(PaperTablesCsv());
  return numbers;
}

PaperNumbers PaperNumbers::Parse(const std::string& csv) {
  PaperNumbers numbers;
  bool header = true;
  for (absl::string_view line : absl::StrSplit(csv, '\n', absl::SkipWhitespace())) {
    if (header) {
      header = false;
      continue;
    }
    std::vector<std::string> fields = absl::StrSplit(line, ',');
    if (fields.size() != 6) continue;
    std::string p = fields[3].empty() ? "" : FormatP(std::stod(fields[3]));
    numbers.values_[fields[0] + "|" + fields[1] + "|" + fields[2] + "|" + p + "|" + fields[4]] =
        std::stod(fields[5]);
  }
  return numbers;
}

std::optional<double> PaperNumbers::Find(const std::string& dataset, const std::string& scale,
                                         const std::string& method, std::optional<double> p,
                                         const std::string& metric) const {
  std::string paper_method = method;
  if (const MethodSpec* spec = FindMethodSpec(method); spec != nullptr && spec->as_p_spheret) {
    paper_method = MethodId(Method::kPSpheret);
    p = spec->as_p_spheret;
  }
  const std::string paper_metric = PaperMetricName(metric);  // as the declarations name it
  const std::string key = dataset + "|" + scale + "|" + paper_method + "|" +
                          (p && MethodReads(paper_method, "p") ? FormatP(*p) : "") + "|" +
                          paper_metric;
  auto found = values_.find(key);
  if (found == values_.end()) return std::nullopt;
  return found->second;
}

std::vector<std::string> PaperNumbers::Datasets() const {
  std::set<std::string> datasets;
  for (const auto& [key, value] : values_) datasets.insert(key.substr(0, key.find('|')));
  return {datasets.begin(), datasets.end()};
}

}  // namespace spheret::client
