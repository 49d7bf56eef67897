#include "server/tokens.h"

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/sha256.h"

namespace spheret {

bool RoleAllows(Role role, Access access) {
  switch (access) {
    case Access::kRead:
      return role == Role::kAdmin || role == Role::kSubmit || role == Role::kRead;
    case Access::kSubmit:
      return role == Role::kAdmin || role == Role::kSubmit;
    case Access::kWorker:
      return role == Role::kAdmin || role == Role::kWorker;
    case Access::kAdmin:
      return role == Role::kAdmin;
  }
  return false;
}

absl::Status CheckWorkerId(const TokenIdentity& caller, const std::string& worker_id) {
  if (caller.role != Role::kWorker) return absl::OkStatus();  // admin, or tokens not required
  if (caller.worker_id.empty()) {
    return absl::PermissionDeniedError(
        "this worker token is bound to no worker id; create one with spheret tokens create "
        "worker --worker-id ID");
  }
  if (caller.worker_id != worker_id) {
    return absl::PermissionDeniedError(absl::StrCat("this token speaks for worker '",
                                                    caller.worker_id, "', not '", worker_id, "'"));
  }
  return absl::OkStatus();
}

absl::StatusOr<NewToken> TokenKeeper::Create(Role role, const std::string& name,
                                             const std::string& worker_id, int64_t ttl_s) {
  if (ttl_s < 0 || ttl_s > kMaxTokenTtlS) {
    return absl::InvalidArgumentError(absl::StrCat("ttl: ", ttl_s, " s is out of range; give 1 to ",
                                                   kMaxTokenTtlS, " s (10 years), or none"));
  }
  const int64_t now_ms = clock_->NowMs();
  NewToken created{"sph_" + RandomHex(24), name.empty() ? RoleName(role) : name, role, worker_id,
                   ttl_s == 0 ? 0 : now_ms + ttl_s * 1000};
  absl::Status stored = store_->CreateToken(Sha256Hex(created.token), created.name, role, worker_id,
                                            now_ms, created.expires_ms);
  if (!stored.ok()) return stored;
  return created;
}

absl::StatusOr<std::vector<TokenRecord>> TokenKeeper::List(int64_t after, int limit) {
  return store_->ListTokens(after, limit);
}

absl::StatusOr<int64_t> TokenKeeper::Revoke(const std::string& name) {
  absl::StatusOr<int64_t> revoked = store_->RevokeToken(name);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    known_.clear();
    ++generation_;
  }
  if (revoked.ok() && *revoked == 0) {
    return absl::NotFoundError(absl::StrCat("no token named '", name, "'"));
  }
  return revoked;
}

absl::StatusOr<TokenIdentity> TokenKeeper::Authorize(std::string_view token, Access access) {
  const std::string hash = Sha256Hex(token);
  std::optional<TokenIdentity> identity;
  uint64_t generation = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto cached = known_.find(hash); cached != known_.end()) identity = cached->second;
    generation = generation_;
  }
  if (!identity) {
    absl::StatusOr<std::optional<TokenIdentity>> stored = store_->FindToken(hash);
    if (!stored.ok()) return absl::UnavailableError(stored.status().message());
    if (!stored->has_value()) return absl::UnauthenticatedError("unknown token");
    identity = **stored;
    std::lock_guard<std::mutex> lock(mutex_);
    if (generation == generation_) known_[hash] = *identity;
  }
  if (identity->expires_ms != 0 && clock_->NowMs() >= identity->expires_ms) {
    return absl::UnauthenticatedError(absl::StrCat(
        "the token expired at ",
        absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", absl::FromUnixMillis(identity->expires_ms),
                         absl::UTCTimeZone()),
        "; create a new one (spheret tokens create --ttl)"));
  }
  if (!RoleAllows(identity->role, access)) {
    return absl::PermissionDeniedError(
        absl::StrCat("a '", RoleName(identity->role), "' token may not call this method"));
  }
  return *identity;
}

}  // namespace spheret
