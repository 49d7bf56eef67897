#include "client/connection.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "net/call_context.h"
#include "net/channel_security.h"

namespace spheret::client {

absl::StatusOr<std::unique_ptr<Connection>> Connection::Open(const ConnectionOptions& options) {
  if (options.address.empty() || options.address.find(':') == std::string::npos) {
    return absl::InvalidArgumentError("--coordinator '" + options.address +
                                      "': expected host:port, e.g. 127.0.0.1:7070");
  }
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      net::ClientCredentials({options.tls_ca_file, options.tls_cert_file, options.tls_key_file});
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
  net::PrepareCall(context.get(), {options_.token, stream ? absl::InfiniteDuration()
                                                          : absl::Seconds(options_.timeout_s)});
  return context;
}

namespace {

bool HasAny(const std::string& text, std::initializer_list<const char*> needles) {
  for (const char* needle : needles) {
    if (absl::StrContains(text, needle)) return true;
  }
  return false;
}

// What a failed handshake's message says to change.
std::string TlsCause(const std::string& message, bool sent_certificate) {
  if (absl::StrContains(message, "certificate verify failed")) {
    return "--tls-ca does not verify the coordinator's certificate (signed by another CA, or "
           "not issued for this address)";
  }
  if (HasAny(message, {"wrong version number", "packet length too long", "http request"})) {
    return "the coordinator does not speak TLS (start it with --tls-cert and --tls-key, or drop "
           "--tls-ca)";
  }
  return sent_certificate ? "the coordinator refused this client certificate (--tls-cert is not "
                            "signed by its --tls-client-ca?)"
                          : "the coordinator requires a client certificate (give --tls-cert and "
                            "--tls-key)";
}

}  // namespace

// gRPC reports every failure to connect as UNAVAILABLE; its message tells the causes apart.
absl::Status Connection::Unreachable(const std::string& message) const {
  const std::string& address = options_.address;
  if (HasAny(message, {"DNS resolution failed", "Name or service not known"})) {
    return absl::UnavailableError(absl::StrCat("cannot resolve the host of ", address, " (",
                                               message,
                                               "); check --coordinator or SPHERET_COORDINATOR"));
  }
  if (HasAny(message, {"Connection refused", "No route to host", "Network is unreachable"})) {
    return absl::UnavailableError(absl::StrCat(
        "nothing is listening at ", address, " (", message,
        "); is spheret-coordinator running there? Set --coordinator or SPHERET_COORDINATOR"));
  }
  const bool tls = !options_.tls_ca_file.empty();
  if (tls && HasAny(message, {"andshake", "SSL", "ssl", "certificate", "alert", "Socket closed",
                              "Connection reset", "Broken pipe"})) {
    return absl::UnavailableError(
        absl::StrCat("the TLS handshake with ", address, " failed (", message,
                     "): ", TlsCause(message, !options_.tls_cert_file.empty())));
  }
  if (!tls && HasAny(message, {"Socket closed", "Connection reset", "Broken pipe", "andshake",
                               "EOF", "closed"})) {
    return absl::UnavailableError(absl::StrCat(
        address, " closed the connection while it was being set up (", message,
        "): the coordinator may require TLS; give --tls-ca (and --tls-cert, --tls-key for "
        "mutual TLS)"));
  }
  return absl::UnavailableError(absl::StrCat(
      "cannot reach the coordinator at ", address, " (", message,
      "); is spheret-coordinator running there? Set --coordinator or SPHERET_COORDINATOR"));
}

absl::Status Connection::Error(const grpc::Status& status, const std::string& what) const {
  const std::string message =
      absl::StrReplaceAll(status.error_message(), {{"\n", " "}, {"\r", " "}});
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      return Unreachable(message);
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
