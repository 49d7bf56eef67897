#include "server/rpc/server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include <chrono>

#include "absl/strings/str_cat.h"
#include "net/channel_security.h"
#include "net/tls_files.h"

namespace spheret::rpc {

absl::Status ValidateServerOptions(ServerOptions* options) {
  if (options->listen.find(':') == std::string::npos) {
    return absl::InvalidArgumentError("--listen must be host:port, got '" + options->listen + "'");
  }
  if (options->tls_cert_file.empty() != options->tls_key_file.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  if (!options->tls_client_ca_file.empty() && options->tls_cert_file.empty()) {
    return absl::InvalidArgumentError("--tls-client-ca needs --tls-cert and --tls-key");
  }
  if (net::IsLoopback(options->listen)) return absl::OkStatus();
  if (options->tls_cert_file.empty() && !options->insecure) {
    return absl::InvalidArgumentError(
        absl::StrCat("--listen ", options->listen,
                     " is not a loopback address: give --tls-cert and --tls-key "
                     "(and create tokens), or pass --insecure on a trusted network"));
  }
  // Off loopback, tokens stay on, with or without TLS; only --no-tokens turns them off.
  if (!options->no_tokens) options->require_tokens = true;
  return absl::OkStatus();
}

namespace {

// The listening port's credentials: TLS (with client certificates when a client CA is given)
// from the files `options` names, each checked, or insecure without them.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentialsOf(
    const ServerOptions& options) {
  if (options.tls_cert_file.empty()) return grpc::InsecureServerCredentials();
  absl::StatusOr<std::string> cert = net::ReadCertificates(options.tls_cert_file, "--tls-cert");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = net::ReadPrivateKey(options.tls_key_file, "--tls-key");
  if (!key.ok()) return key.status();
  if (absl::Status match = net::CheckKeyMatches(*cert, *key, "--tls-cert " + options.tls_cert_file,
                                                "--tls-key " + options.tls_key_file);
      !match.ok()) {
    return match;
  }
  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back({*key, *cert});
  if (!options.tls_client_ca_file.empty()) {
    absl::StatusOr<std::string> ca =
        net::ReadCertificates(options.tls_client_ca_file, "--tls-client-ca");
    if (!ca.ok()) return ca.status();
    ssl.pem_root_certs = *ca;
    ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(ssl);
}

}  // namespace

CoordinatorServer::CoordinatorServer(Coordinator* coordinator, bool require_tokens)
    : auth_(&coordinator->tokens(), require_tokens),
      sweeps_(coordinator, &auth_),
      workers_(coordinator, &auth_),
      tokens_(coordinator, &auth_) {}

absl::StatusOr<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Start(
    Coordinator* coordinator, ServerOptions options) {
  if (absl::Status status = ValidateServerOptions(&options); !status.ok()) return status;
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      ServerCredentialsOf(options);
  if (!credentials.ok()) return credentials.status();
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  std::unique_ptr<CoordinatorServer> server(
      new CoordinatorServer(coordinator, options.require_tokens));
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, *credentials, &server->port_);
  builder.RegisterService(&server->sweeps_);
  builder.RegisterService(&server->workers_);
  builder.RegisterService(&server->tokens_);
  builder.SetMaxReceiveMessageSize(kMaxReceiveBytes);
  // Dead peers (a watcher whose machine went away) are noticed and their streams end.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, kKeepaliveMs);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kKeepaliveTimeoutMs);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // A sync server's polling threads notice a shutdown only when their wait for the next call
  // times out (10 s by default): a SIGTERM then took up to 12 s instead of the 2 s grace.
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::CQ_TIMEOUT_MSEC,
                              kPollTimeoutMs);
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    // The TLS files were checked above, so what is left is the address itself.
    return absl::UnavailableError("cannot listen on " + options.listen +
                                  " (address in use or not local?)");
  }
  return server;
}

CoordinatorServer::~CoordinatorServer() { Shutdown(0); }

void CoordinatorServer::Shutdown(int grace_ms) {
  if (server_ == nullptr) return;
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(grace_ms));
  server_->Wait();
  server_.reset();
}

}  // namespace spheret::rpc
