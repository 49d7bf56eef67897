#include "server/sweep/sweep_scan.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/text_prefix.h"

namespace spheret::sweep_yaml {
namespace {

// Thrown out of the parser by Counter at the first limit passed.
struct LimitPassed {
  absl::Status status;
};

// Counts the parser's events; throws LimitPassed as soon as a limit is passed, so a huge
// document is refused after reading no more of it than the limit.
class Counter : public YAML::EventHandler {
 public:
  explicit Counter(const SweepFileLimits& limits) : limits_(limits) {}

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { Node(mark); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { Node(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                const std::string& value) override {
    Node(mark);
    if (value.size() > limits_.max_scalar_bytes) {
      Refuse(mark,
             absl::StrCat("a value of ", value.size(), " bytes, above the limit of ",
                          limits_.max_scalar_bytes, " (starts '", TextPrefix(value, 16), "')"));
    }
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    Enter(mark);
  }
  void OnSequenceEnd() override { --depth_; }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    Enter(mark);
  }
  void OnMapEnd() override { --depth_; }

 private:
  [[noreturn]] static void Refuse(const YAML::Mark& mark, const std::string& what) {
    throw LimitPassed{absl::InvalidArgumentError(absl::StrCat("line ", mark.line + 1, ": ", what))};
  }
  void Node(const YAML::Mark& mark) {
    if (++nodes_ > limits_.max_nodes) {
      Refuse(mark, absl::StrCat("more than ", limits_.max_nodes,
                                " values, lists and mappings in the file (the limit)"));
    }
  }
  void Enter(const YAML::Mark& mark) {
    Node(mark);
    if (++depth_ > limits_.max_depth) {
      Refuse(mark, absl::StrCat("nested more than ", limits_.max_depth,
                                " lists or mappings deep (the limit)"));
    }
  }

  const SweepFileLimits& limits_;
  int64_t nodes_ = 0;
  int depth_ = 0;
};

}  // namespace

absl::Status CheckSweepFileShape(std::string_view yaml, const SweepFileLimits& limits) {
  if (yaml.size() > limits.max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("sweep file: ", yaml.size(), " bytes, above the limit of ", limits.max_bytes));
  }
  std::istringstream in{std::string(yaml)};
  Counter counter(limits);
  try {
    YAML::Parser parser(in);
    parser.HandleNextDocument(counter);
  } catch (const LimitPassed& passed) {
    return passed.status;
  } catch (const YAML::Exception&) {
    // A syntax error: YAML::Load, which runs next, reports it with its line.
  }
  return absl::OkStatus();
}

}  // namespace spheret::sweep_yaml
