// Bearer-token authorization of every RPC. Tokens are stored as SHA-256 hashes with one role:
// admin (everything), submit (sweeps: submit, cancel, read), read (sweeps: read), worker (the
// worker service, for the one worker id the token is bound to). With `required` false (loopback
// default) every call is allowed.
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include "server/store/store.h"

namespace spheret::rpc {

enum class Access { kRead, kSubmit, kWorker, kAdmin };

class Authorizer {
 public:
  Authorizer(store::Store* store, bool required) : store_(store), required_(required) {}
  // OK, UNAUTHENTICATED (no or unknown token) or PERMISSION_DENIED (role lacks `access`). On OK,
  // *caller (when given) is who the token speaks for; empty when tokens are not required.
  grpc::Status Check(const grpc::ServerContext* context, Access access,
                     TokenIdentity* caller = nullptr);
  bool required() const { return required_; }
  // Forgets the cached roles (after a token was revoked).
  void Forget();

 private:
  store::Store* store_;
  const bool required_;
  std::mutex mutex_;
  std::unordered_map<std::string, TokenIdentity> roles_;  // token hash -> identity (known tokens)
  uint64_t generation_ = 0;  // bumped by Forget: a role read before it is not cached after it
};

// Whether `role` grants `access`.
bool RoleAllows(const std::string& role, Access access);

// OK unless `caller` is a worker token that speaks for another worker than `worker_id` (or for
// none: a worker token made before tokens were bound): PERMISSION_DENIED naming both.
grpc::Status CheckWorkerId(const TokenIdentity& caller, const std::string& worker_id);

}  // namespace spheret::rpc
