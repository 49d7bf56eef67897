#include "config/connection_script.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "base/sha256.h"
#include "base/status_macros.h"
#include "base/text_prefix.h"

namespace spheret {
namespace {

namespace fs = std::filesystem;

bool IsSha256Hex(std::string_view text) {
  if (text.size() != 64) return false;
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

absl::Status CheckSize(const std::string& what, size_t bytes) {
  if (bytes <= kMaxConnectionScriptBytes) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(what, " holds ", bytes,
                                                 " bytes, above the limit of ",
                                                 kMaxConnectionScriptBytes, " for a connection"));
}

// The bytes of connection_script; InvalidArgument when it is not base64 or decodes too long.
absl::Status DecodeScript(const std::string& base64, std::string* bytes) {
  // Base64 grows 4/3: refuse a text over the limit before decoding it.
  SPHERET_RETURN_IF_ERROR(CheckSize("config key 'connection_script'", base64.size() / 4 * 3));
  if (!absl::Base64Unescape(base64, bytes)) {
    return absl::InvalidArgumentError(
        "config key 'connection_script' must be the connection file in base64, got \"" +
        TextPrefix(base64, 32) + "\"");
  }
  return CheckSize("config key 'connection_script'", bytes->size());
}

// The file `connection` names: the path as given when it is a file, else under data_root.
absl::Status ReadConnectionFile(const TrainConfig& config, std::string* bytes) {
  std::error_code ec;
  fs::path path = config.connection_file;
  if (!fs::is_regular_file(path, ec)) path = fs::path(config.data_root) / config.connection_file;
  const std::string shown = "connection file " + TextPrefix(config.connection_file);
  if (!fs::is_regular_file(path, ec)) {
    return absl::InvalidArgumentError(shown + " is neither a file nor a file under --data-root " +
                                      TextPrefix(config.data_root));
  }
  const auto size = fs::file_size(path, ec);
  if (ec) return absl::InvalidArgumentError(shown + ": " + ec.message());
  SPHERET_RETURN_IF_ERROR(CheckSize(shown, static_cast<size_t>(size)));
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in.good() && !in.eof()) return absl::InvalidArgumentError("cannot read " + path.string());
  *bytes = text.str();
  return CheckSize(shown, bytes->size());
}

}  // namespace

absl::Status CheckConnectionScriptKeys(const TrainConfig& config) {
  const bool scripted = config.connection.method == Method::kScripted;
  if (scripted && config.connection_file.empty()) {
    return absl::InvalidArgumentError(
        "method scripted needs config key 'connection': the TorchScript file of the connection "
        "(docs/connections.md)");
  }
  if (!scripted) {
    for (const auto& [key, value] :
         {std::pair<const char*, const std::string*>{"connection", &config.connection_file},
          {"connection_sha256", &config.connection_sha256},
          {"connection_script", &config.connection_script}}) {
      if (!value->empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("config key '", key, "' is read only by method scripted, not ",
                         std::string(MethodId(config.connection.method))));
      }
    }
    return absl::OkStatus();
  }
  if (!config.connection_sha256.empty() && !IsSha256Hex(config.connection_sha256)) {
    return absl::InvalidArgumentError(
        "config key 'connection_sha256' must be 64 lowercase hex digits, got \"" +
        TextPrefix(config.connection_sha256, 80) + "\"");
  }
  if (config.connection_script.empty()) return absl::OkStatus();
  std::string bytes;
  SPHERET_RETURN_IF_ERROR(DecodeScript(config.connection_script, &bytes));
  const std::string sha = Sha256Hex(bytes);
  if (!config.connection_sha256.empty() && sha != config.connection_sha256) {
    return absl::InvalidArgumentError("config key 'connection_script' has SHA-256 " + sha +
                                      ", but connection_sha256 says " + config.connection_sha256);
  }
  return absl::OkStatus();
}

absl::Status LoadConnectionScript(TrainConfig* config) {
  if (config->connection.method != Method::kScripted) return absl::OkStatus();
  std::string bytes;
  if (!config->connection_script.empty()) {
    SPHERET_RETURN_IF_ERROR(DecodeScript(config->connection_script, &bytes));
  } else {
    SPHERET_RETURN_IF_ERROR(ReadConnectionFile(*config, &bytes));
  }
  const std::string sha = Sha256Hex(bytes);
  if (!config->connection_sha256.empty() && sha != config->connection_sha256) {
    return absl::FailedPreconditionError(
        "connection file " + TextPrefix(config->connection_file) + " has SHA-256 " + sha +
        ", but the config expects " + config->connection_sha256 +
        " (the file changed since the trial was made; submit the sweep again for new trials)");
  }
  config->connection_sha256 = sha;
  config->connection.script = std::move(bytes);
  return absl::OkStatus();
}

std::string ConnectionStem(std::string_view connection) {
  return fs::path(std::string(connection)).stem().string();
}

}  // namespace spheret
