#include "server/rpc/auth.h"

#include "common/sha256.h"

namespace spheret::rpc {

bool RoleAllows(const std::string& role, Access access) {
  switch (access) {
    case Access::kRead:
      return role == "admin" || role == "submit" || role == "read";
    case Access::kSubmit:
      return role == "admin" || role == "submit";
    case Access::kWorker:
      return role == "admin" || role == "worker";
    case Access::kAdmin:
      return role == "admin";
  }
  return false;
}

void Authorizer::Forget() {
  std::lock_guard<std::mutex> lock(mutex_);
  roles_.clear();
  ++generation_;
}

grpc::Status CheckWorkerId(const TokenIdentity& caller, const std::string& worker_id) {
  if (caller.role != "worker") return grpc::Status::OK;  // admin, or tokens not required
  if (caller.worker_id.empty()) {
    return {grpc::StatusCode::PERMISSION_DENIED,
            "this worker token is bound to no worker id; create one with spheret tokens create "
            "worker --worker-id ID"};
  }
  if (caller.worker_id != worker_id) {
    return {grpc::StatusCode::PERMISSION_DENIED, "this token speaks for worker '" +
                                                     caller.worker_id + "', not '" + worker_id +
                                                     "'"};
  }
  return grpc::Status::OK;
}

grpc::Status Authorizer::Check(const grpc::ServerContext* context, Access access,
                               TokenIdentity* caller) {
  if (!required_) return grpc::Status::OK;
  const auto& metadata = context->client_metadata();
  auto header = metadata.find("authorization");
  const std::string kBearer = "Bearer ";
  if (header == metadata.end() || header->second.size() <= kBearer.size() ||
      std::string(header->second.data(), kBearer.size()) != kBearer) {
    return {grpc::StatusCode::UNAUTHENTICATED,
            "missing 'authorization: Bearer <token>' (create one with spheret-coordinator "
            "--create-token ROLE, or spheret tokens create ROLE)"};
  }
  const std::string hash = Sha256Hex(std::string_view(header->second.data() + kBearer.size(),
                                                      header->second.size() - kBearer.size()));
  TokenIdentity identity;
  uint64_t generation = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto cached = roles_.find(hash);
    if (cached != roles_.end()) identity = cached->second;
    generation = generation_;
  }
  if (identity.role.empty()) {
    absl::StatusOr<std::optional<TokenIdentity>> stored = store_->FindToken(hash);
    if (!stored.ok())
      return {grpc::StatusCode::UNAVAILABLE, std::string(stored.status().message())};
    if (!stored->has_value()) return {grpc::StatusCode::UNAUTHENTICATED, "unknown token"};
    identity = **stored;
    std::lock_guard<std::mutex> lock(mutex_);
    if (generation == generation_) roles_[hash] = identity;
  }
  if (!RoleAllows(identity.role, access)) {
    return {grpc::StatusCode::PERMISSION_DENIED,
            "a '" + identity.role + "' token may not call this method"};
  }
  if (caller != nullptr) *caller = identity;
  return grpc::Status::OK;
}

}  // namespace spheret::rpc
