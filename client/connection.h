// The CLI's connection to a coordinator: a channel (TLS when a CA file is given, with a client
// certificate for mTLS), the service
// stubs, call contexts carrying the token and a deadline, and one-line errors for failed calls.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "spheret/v1/admin.grpc.pb.h"
#include "spheret/v1/sweeps.grpc.pb.h"

namespace spheret::client {

struct ConnectionOptions {
  std::string address = "127.0.0.1:7070";   // host:port of spheret-coordinator
  std::string token;                        // sent as "authorization: Bearer TOKEN" when set
  std::string tls_ca_file;                  // PEM; set: connect with TLS verified by this CA
  std::string tls_cert_file, tls_key_file;  // PEM client certificate and key (mTLS)
  int timeout_s = 30;                       // deadline of each unary call
};

class Connection {
 public:
  static absl::StatusOr<std::unique_ptr<Connection>> Open(const ConnectionOptions& options);

  v1::SweepService::Stub& sweeps() { return *sweeps_; }
  v1::TokenService::Stub& tokens() { return *tokens_; }
  // A context with the token and, unless `stream`, the call deadline.
  std::unique_ptr<grpc::ClientContext> Context(bool stream = false) const;
  // A one-line error for a failed call of `what` ("SubmitSweep"): which server could not be
  // reached, which token was refused, or the coordinator's message.
  absl::Status Error(const grpc::Status& status, const std::string& what) const;
  const std::string& address() const { return options_.address; }

 private:
  // UNAVAILABLE's message for people: nothing listening, a failed TLS handshake, or a
  // connection closed during setup (TLS expected), each with what to change.
  absl::Status Unreachable(const std::string& message) const;
  explicit Connection(ConnectionOptions options) : options_(std::move(options)) {}
  ConnectionOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::SweepService::Stub> sweeps_;
  std::unique_ptr<v1::TokenService::Stub> tokens_;
};

}  // namespace spheret::client
