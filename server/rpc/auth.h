// Bearer-token checks of every RPC: the token from the `authorization` metadata, judged by the
// coordinator's TokenKeeper (roles and rights live there). With `required` false (the loopback
// default) every call is allowed.
#pragma once

#include <grpcpp/grpcpp.h>

#include "server/tokens.h"

namespace spheret::rpc {

class Authorizer {
 public:
  Authorizer(TokenKeeper* tokens, bool required) : tokens_(tokens), required_(required) {}
  // OK, UNAUTHENTICATED (no or unknown token) or PERMISSION_DENIED (role lacks `access`). On OK,
  // *caller (when given) is who the token speaks for; an admin identity when tokens are not
  // required.
  grpc::Status Check(const grpc::ServerContext* context, Access access,
                     TokenIdentity* caller = nullptr);
  bool required() const { return required_; }

 private:
  TokenKeeper* tokens_;
  const bool required_;
};

}  // namespace spheret::rpc
