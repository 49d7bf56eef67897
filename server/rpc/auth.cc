#include "server/rpc/auth.h"

#include "server/rpc/convert.h"

namespace spheret::rpc {

grpc::Status Authorizer::Check(const grpc::ServerContext* context, Access access,
                               TokenIdentity* caller) {
  if (!required_) {
    if (caller != nullptr) *caller = TokenIdentity{Role::kAdmin, "", 0};
    return grpc::Status::OK;
  }
  const auto& metadata = context->client_metadata();
  auto header = metadata.find("authorization");
  constexpr std::string_view kBearer = "Bearer ";
  if (header == metadata.end() || header->second.size() <= kBearer.size() ||
      std::string_view(header->second.data(), kBearer.size()) != kBearer) {
    return {grpc::StatusCode::UNAUTHENTICATED,
            "missing 'authorization: Bearer <token>' (create one with spheret-coordinator "
            "--create-token ROLE, or spheret tokens create ROLE)"};
  }
  absl::StatusOr<TokenIdentity> identity =
      tokens_->Authorize(std::string_view(header->second.data() + kBearer.size(),
                                          header->second.size() - kBearer.size()),
                         access);
  if (!identity.ok()) return ToGrpcStatus(identity.status());
  if (caller != nullptr) *caller = *identity;
  return grpc::Status::OK;
}

}  // namespace spheret::rpc
