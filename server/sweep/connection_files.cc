#include "server/sweep/connection_files.h"

#include <set>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "base/sha256.h"
#include "base/text_prefix.h"
#include "config/connection_script.h"
#include "server/sweep/sweep_spec.h"

namespace spheret {

using nlohmann::json;

std::vector<std::string> ConnectionNames(const SweepSpec& spec) {
  std::set<std::string> names;
  const auto add = [&names](const json& value) {
    if (value.is_string()) names.insert(value.get<std::string>());
  };
  if (spec.base.contains("connection")) add(spec.base["connection"]);
  for (const ParameterAxis& axis : spec.parameters) {
    if (axis.key == "connection") {
      for (const json& value : axis.values) add(value);
    }
    for (const auto& [key, values] : axis.linked) {
      if (key != "connection") continue;
      for (const json& value : values) add(value);
    }
  }
  return {names.begin(), names.end()};
}

absl::Status CheckConnectionFiles(const ConnectionFiles& files) {
  if (files.size() > kMaxConnectionFiles) {
    return absl::InvalidArgumentError(absl::StrCat("the sweep sends ", files.size(),
                                                   " connection files, above the limit of ",
                                                   kMaxConnectionFiles));
  }
  for (const auto& [name, bytes] : files) {
    if (name.empty() || name.size() > kMaxKnobTextBytes) {
      return absl::InvalidArgumentError(absl::StrCat("a connection file's name of ", name.size(),
                                                     " bytes (1 to ", kMaxKnobTextBytes, ")"));
    }
    if (bytes.size() > kMaxConnectionScriptBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "connection file ", TextPrefix(name), ": ", bytes.size(), " bytes, above the limit of ",
          kMaxConnectionScriptBytes, " for a connection"));
    }
  }
  return absl::OkStatus();
}

absl::Status AttachConnection(const ConnectionFiles& files, json* config) {
  const auto named = config->find("connection");
  if (named == config->end() || !named->is_string()) return absl::OkStatus();
  const std::string name = named->get<std::string>();
  const auto expected = config->find("connection_sha256");
  const auto file = files.find(name);
  if (file == files.end()) {
    if (expected != config->end()) return absl::OkStatus();  // under the workers' --data-root
    return absl::InvalidArgumentError(
        "connection: the file '" + TextPrefix(name) +
        "' was not sent with the sweep (spheret submit sends each file a sweep names, read "
        "relative to the sweep file; a file under the workers' --data-root needs "
        "connection_sha256)");
  }
  const std::string sha = Sha256Hex(file->second);
  if (expected != config->end() && *expected != json(sha)) {
    return absl::InvalidArgumentError("connection: the file '" + TextPrefix(name) +
                                      "' has SHA-256 " + sha + ", but connection_sha256 says " +
                                      TextPrefix(expected->dump(), 80));
  }
  (*config)["connection_sha256"] = sha;
  (*config)["connection_script"] = absl::Base64Escape(file->second);
  return absl::OkStatus();
}

}  // namespace spheret
