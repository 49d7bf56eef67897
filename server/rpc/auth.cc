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

grpc::Status Authorizer::Check(const grpc::ServerContext* context, Access access) {
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
  std::string role;
  uint64_t generation = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto cached = roles_.find(hash);
    if (cached != roles_.end()) role = cached->second;
    generation = generation_;
  }
  if (role.empty()) {
    absl::StatusOr<std::optional<std::string>> stored = store_->TokenRole(hash);
    if (!stored.ok())
      return {grpc::StatusCode::UNAVAILABLE, std::string(stored.status().message())};
    if (!stored->has_value()) return {grpc::StatusCode::UNAUTHENTICATED, "unknown token"};
    role = **stored;
    std::lock_guard<std::mutex> lock(mutex_);
    if (generation == generation_) roles_[hash] = role;
  }
  if (!RoleAllows(role, access)) {
    return {grpc::StatusCode::PERMISSION_DENIED, "a '" + role + "' token may not call this method"};
  }
  return grpc::Status::OK;
}

}  // namespace spheret::rpc
