// The coordinator's gRPC server: the sweep, worker and token services, health checking and
// reflection, on one address, with TLS and token checks as the options ask.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/coordinator.h"
#include "server/rpc/auth.h"
#include "server/rpc/services.h"

namespace spheret::rpc {

struct ServerOptions {
  std::string listen = "127.0.0.1:7070";    // host:port; port 0 picks a free one
  std::string tls_cert_file, tls_key_file;  // PEM files; both or neither
  std::string tls_client_ca_file;           // optional: require client certificates (mTLS)
  bool require_tokens = false;  // forced on for a non-loopback address unless `no_tokens`
  bool insecure = false;        // allow a non-loopback address without TLS (tokens stay on)
  bool no_tokens = false;       // allow a non-loopback address without tokens (say it on purpose)
};

// Checks the security rules: a non-loopback address (net::IsLoopback) needs TLS unless
// `insecure`, and always tokens unless `no_tokens`. Turns require_tokens on where the rules
// demand it.
absl::Status ValidateServerOptions(ServerOptions* options);

class CoordinatorServer {
 public:
  static absl::StatusOr<std::unique_ptr<CoordinatorServer>> Start(Coordinator* coordinator,
                                                                  ServerOptions options);
  ~CoordinatorServer();
  int port() const { return port_; }
  // Stops accepting calls and ends open ones (streams included) within `grace_ms`.
  void Shutdown(int grace_ms = 2000);
  void Wait() { server_->Wait(); }

 private:
  CoordinatorServer(Coordinator* coordinator, bool require_tokens);
  Authorizer auth_;
  SweepService sweeps_;
  WorkerService workers_;
  TokenService tokens_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace spheret::rpc
