// API tokens: minting (only a token's SHA-256 is stored), who a token speaks for (cached), and
// what each role may do. Thread-safe.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/clock.h"
#include "server/domain/records.h"
#include "server/store/store.h"

namespace spheret {

// What a call needs.
enum class Access { kRead, kSubmit, kWorker, kAdmin };

// Whether `role` grants `access`: admin everything, submit read and submit, read read, worker the
// worker service.
bool RoleAllows(Role role, Access access);

// OK unless `caller` is a worker token that speaks for another worker than `worker_id` (or for
// none: a worker token made before tokens were bound): PermissionDenied naming both.
absl::Status CheckWorkerId(const TokenIdentity& caller, const std::string& worker_id);

// A token as created: shown once, never stored.
struct NewToken {
  std::string token;  // "sph_" + 48 hex digits
  std::string name;
  Role role = Role::kRead;
  std::string worker_id;
  int64_t expires_ms = 0;  // 0: never expires
};

// The longest lifetime a token may be given (--ttl), 10 years.
inline constexpr int64_t kMaxTokenTtlS = 10LL * 366 * 24 * 3600;

class TokenKeeper {
 public:
  // `store` and `clock` must outlive it.
  TokenKeeper(store::TokenStore* store, const Clock* clock) : store_(store), clock_(clock) {}

  // Mints a token of `role` named `name` ("" names it after the role), bound to `worker_id`
  // (required for, and only for, a worker token: InvalidArgument otherwise), that expires
  // `ttl_s` seconds from now (0: never; InvalidArgument outside [0, kMaxTokenTtlS]).
  absl::StatusOr<NewToken> Create(Role role, const std::string& name, const std::string& worker_id,
                                  int64_t ttl_s = 0);
  // Tokens after token id `after` in creation order, at most `limit`.
  absl::StatusOr<std::vector<TokenRecord>> List(int64_t after, int limit);
  // Deletes the tokens named `name` (NotFound when there are none) and forgets cached identities.
  absl::StatusOr<int64_t> Revoke(const std::string& name);
  // Who `token` speaks for when its role grants `access`: Unauthenticated for an unknown or
  // expired token, PermissionDenied for a role without `access`, Unavailable when the store
  // cannot answer. Long calls (WatchSweep) call it again as they go, so a revoked or expired
  // token ends them.
  absl::StatusOr<TokenIdentity> Authorize(std::string_view token, Access access);

 private:
  store::TokenStore* store_;
  const Clock* clock_;
  std::mutex mutex_;
  std::unordered_map<std::string, TokenIdentity> known_;  // token hash -> identity
  uint64_t generation_ = 0;  // bumped by Revoke: an identity read before it is not cached after
};

}  // namespace spheret
