// `spheret tokens create|list|revoke` (admin tokens only, when the coordinator requires tokens).
#include "client/commands.h"
#include "client/proto_text.h"
#include "client/report/table.h"

namespace spheret::client {

absl::Status Tokens(Connection& connection, const TokensOptions& options, std::ostream& out) {
  if (options.action == "create") {
    v1::CreateTokenRequest request;
    request.set_role(options.role);
    request.set_name(options.name);
    request.set_worker_id(options.worker_id);
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
  if (options.action == "revoke") {
    v1::RevokeTokenRequest request;
    request.set_name(options.name);
    v1::RevokeTokenResponse response;
    grpc::Status status =
        connection.tokens().RevokeToken(connection.Context().get(), request, &response);
    if (!status.ok()) return connection.Error(status, "tokens revoke");
    out << "revoked " << response.revoked() << " token(s) named '" << options.name << "'\n";
    return absl::OkStatus();
  }
  v1::ListTokensResponse response;
  grpc::Status status = connection.tokens().ListTokens(connection.Context().get(),
                                                       v1::ListTokensRequest(), &response);
  if (!status.ok()) return connection.Error(status, "tokens list");
  if (options.json) {
    out << ProtoJsonArray(
               std::vector<v1::TokenInfo>(response.tokens().begin(), response.tokens().end()))
        << "\n";
    return absl::OkStatus();
  }
  Table table;
  table.header = {"name", "role", "worker", "hash", "created_ms"};
  for (const v1::TokenInfo& token : response.tokens()) {
    table.rows.push_back({token.name(), token.role(), token.worker_id(), token.hash_prefix(),
                          std::to_string(token.created_ms())});
  }
  out << RenderText(table);
  return absl::OkStatus();
}

}  // namespace spheret::client
