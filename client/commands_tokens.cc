// `spheret tokens create|list|revoke` (admin tokens only, when the coordinator requires tokens).
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/commands.h"
#include "client/proto_text.h"
#include "client/report/table.h"

namespace spheret::client {
namespace {

// "3600", "90s", "90m", "12h", "30d" -> seconds.
absl::StatusOr<int64_t> ParseTtl(const std::string& text) {
  std::string digits = text;
  int64_t unit = 1;
  if (!text.empty()) {
    const char suffix = text.back();
    const int64_t units[] = {1, 60, 3600, 86400};
    const std::string suffixes = "smhd";
    if (const size_t at = suffixes.find(suffix); at != std::string::npos) {
      unit = units[at];
      digits.pop_back();
    }
  }
  int64_t count = 0;
  if (!absl::SimpleAtoi(digits, &count) || count <= 0 || count > INT64_MAX / 86400 / unit) {
    return absl::InvalidArgumentError(
        absl::StrCat("--ttl '", text.substr(0, 40),
                     "': expected a positive count of seconds, or of s, m, h or d (e.g. 30d)"));
  }
  return count * unit;
}

std::string ExpiryText(int64_t expires_ms) {
  if (expires_ms == 0) return "never";
  return absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", absl::FromUnixMillis(expires_ms),
                          absl::UTCTimeZone());
}

absl::Status CreateToken(Connection& connection, const TokensOptions& options, std::ostream& out) {
  v1::CreateTokenRequest request;
  request.set_role(options.role);
  request.set_name(options.name);
  request.set_worker_id(options.worker_id);
  if (!options.ttl.empty()) {
    absl::StatusOr<int64_t> ttl_s = ParseTtl(options.ttl);
    if (!ttl_s.ok()) return ttl_s.status();
    request.set_ttl_s(*ttl_s);
  }
  v1::CreateTokenResponse response;
  grpc::Status status =
      connection.tokens().CreateToken(connection.Context().get(), request, &response);
  if (!status.ok()) return connection.Error(status, "tokens create");
  if (options.json) {
    out << ProtoJson(response) << "\n";
  } else {
    out << response.token() << "\n";  // alone on its line: shown once, only its hash is kept
  }
  return absl::OkStatus();
}

absl::Status RevokeToken(Connection& connection, const TokensOptions& options, std::ostream& out) {
  v1::RevokeTokenRequest request;
  request.set_name(options.name);
  v1::RevokeTokenResponse response;
  grpc::Status status =
      connection.tokens().RevokeToken(connection.Context().get(), request, &response);
  if (!status.ok()) return connection.Error(status, "tokens revoke");
  out << "revoked " << response.revoked() << " token(s) named '" << options.name << "'\n";
  return absl::OkStatus();
}

// Every token, page by page.
absl::StatusOr<std::vector<v1::TokenInfo>> AllTokens(Connection& connection) {
  std::vector<v1::TokenInfo> tokens;
  v1::ListTokensRequest request;
  request.set_page_size(1000);
  for (;;) {
    v1::ListTokensResponse response;
    grpc::Status status =
        connection.tokens().ListTokens(connection.Context().get(), request, &response);
    if (!status.ok()) return connection.Error(status, "tokens list");
    tokens.insert(tokens.end(), response.tokens().begin(), response.tokens().end());
    if (response.next_page_token() == 0) break;
    request.set_page_token(response.next_page_token());
  }
  return tokens;
}

absl::Status ListTokens(Connection& connection, const TokensOptions& options, std::ostream& out) {
  absl::StatusOr<std::vector<v1::TokenInfo>> tokens = AllTokens(connection);
  if (!tokens.ok()) return tokens.status();
  if (options.json) {
    out << ProtoJsonArray(*tokens) << "\n";
    return absl::OkStatus();
  }
  Table table;
  table.header = {"name", "role", "worker", "hash", "created_ms", "expires"};
  for (const v1::TokenInfo& token : *tokens) {
    table.rows.push_back({token.name(), token.role(), token.worker_id(), token.hash_prefix(),
                          std::to_string(token.created_ms()), ExpiryText(token.expires_ms())});
  }
  out << RenderText(table);
  return absl::OkStatus();
}

}  // namespace

absl::Status Tokens(Connection& connection, const TokensOptions& options, std::ostream& out) {
  if (options.action == "create") return CreateToken(connection, options, out);
  if (options.action == "revoke") return RevokeToken(connection, options, out);
  return ListTokens(connection, options, out);
}

}  // namespace spheret::client
