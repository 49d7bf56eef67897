#include <algorithm>

#include "absl/strings/str_cat.h"
#include "server/rpc/convert.h"
#include "server/rpc/services.h"

namespace spheret::rpc {

#define SPHERET_AUTHORIZE(access) \
  if (grpc::Status denied = auth_->Check(context, access); !denied.ok()) return denied

grpc::Status TokenService::CreateToken(grpc::ServerContext* context,
                                       const v1::CreateTokenRequest* request,
                                       v1::CreateTokenResponse* response) {
  SPHERET_AUTHORIZE(Access::kAdmin);
  absl::StatusOr<Role> role = ParseRole(request->role());
  if (!role.ok()) return ToGrpcStatus(role.status());
  absl::StatusOr<NewToken> token =
      coordinator_->tokens().Create(*role, request->name(), request->worker_id(), request->ttl_s());
  if (!token.ok()) return ToGrpcStatus(token.status());
  response->set_token(token->token);
  response->set_name(token->name);
  response->set_role(RoleName(token->role));
  response->set_worker_id(token->worker_id);
  response->set_expires_ms(token->expires_ms);
  return grpc::Status::OK;
}

grpc::Status TokenService::ListTokens(grpc::ServerContext* context,
                                      const v1::ListTokensRequest* request,
                                      v1::ListTokensResponse* response) {
  SPHERET_AUTHORIZE(Access::kAdmin);
  const int page = request->page_size() <= 0 ? 100 : std::min(request->page_size(), 1000);
  absl::StatusOr<std::vector<TokenRecord>> tokens =
      coordinator_->tokens().List(request->page_token(), page);
  if (!tokens.ok()) return ToGrpcStatus(tokens.status());
  for (const TokenRecord& token : *tokens) {
    v1::TokenInfo* info = response->add_tokens();
    info->set_name(token.name);
    info->set_role(RoleName(token.role));
    info->set_hash_prefix(token.hash_prefix);
    info->set_created_ms(token.created_ms);
    info->set_worker_id(token.worker_id);
    info->set_expires_ms(token.expires_ms);
    info->set_token_id(token.token_id);
  }
  if (static_cast<int>(tokens->size()) == page)
    response->set_next_page_token(tokens->back().token_id);
  return grpc::Status::OK;
}

grpc::Status TokenService::RevokeToken(grpc::ServerContext* context,
                                       const v1::RevokeTokenRequest* request,
                                       v1::RevokeTokenResponse* response) {
  SPHERET_AUTHORIZE(Access::kAdmin);
  absl::StatusOr<int64_t> revoked = coordinator_->tokens().Revoke(request->name());
  if (!revoked.ok()) return ToGrpcStatus(revoked.status());
  response->set_revoked(*revoked);
  return grpc::Status::OK;
}

}  // namespace spheret::rpc
