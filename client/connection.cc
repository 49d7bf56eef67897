#include "client/connection.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "net/channel_security.h"

namespace spheret::client {

absl::StatusOr<std::unique_ptr<Connection>> Connection::Open(const ConnectionOptions& options) {
  if (options.address.empty() || options.address.find(':') == std::string::npos) {
    return absl::InvalidArgumentError("--coordinator '" + options.address +
                                      "': expected host:port, e.g. 127.0.0.1:7070");
  }
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials = net::ClientCredentials(
      {options.tls_ca_file, options.tls_cert_file, options.tls_key_file});
  if (!credentials.ok()) return credentials.status();
  std::unique_ptr<Connection> connection(new Connection(options));
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(256 << 20);
  connection->channel_ = grpc::CreateCustomChannel(options.address, *credentials, arguments);
  connection->sweeps_ = v1::SweepService::NewStub(connection->channel_);
  connection->tokens_ = v1::TokenService::NewStub(connection->channel_);
  return connection;
}

std::unique_ptr<grpc::ClientContext> Connection::Context(bool stream) const {
  auto context = std::make_unique<grpc::ClientContext>();
  if (!options_.token.empty()) context->AddMetadata("authorization", "Bearer " + options_.token);
  if (!stream) {
    context->set_deadline(std::chrono::system_clock::now() +
                          std::chrono::seconds(options_.timeout_s));
  }
  return context;
}

absl::Status Connection::Error(const grpc::Status& status, const std::string& what) const {
  const std::string message =
      absl::StrReplaceAll(status.error_message(), {{"\n", " "}, {"\r", " "}});
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      return absl::UnavailableError(absl::StrCat(
          "cannot reach the coordinator at ", options_.address, " (", message,
          "); is spheret-coordinator running there? Set --coordinator or SPHERET_COORDINATOR"));
    case grpc::StatusCode::UNAUTHENTICATED:
      return absl::UnauthenticatedError(
          absl::StrCat("the coordinator at ", options_.address, " refused the call (", message,
                       "); pass a valid token with --token or SPHERET_TOKEN"));
    case grpc::StatusCode::NOT_FOUND:
      return absl::NotFoundError(message);  // names what is missing ("no sweep 7")
    case grpc::StatusCode::PERMISSION_DENIED:
      return absl::PermissionDeniedError(absl::StrCat(what, ": ", message));
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return absl::DeadlineExceededError(absl::StrCat(what, ": no answer from ", options_.address,
                                                      " within ", options_.timeout_s,
                                                      " s (--timeout)"));
    default:
      return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                          absl::StrCat(what, ": ", message));
  }
}

}  // namespace spheret::client
