// Transport security shared by the coordinator, the worker and the CLI: whether an address is a
// loopback one (parsed, not matched by prefix), and client channel credentials from PEM files
// (TLS verified by a CA, plus a client certificate for mTLS).
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace spheret::net {

// True when `host_port` ("127.0.0.1:7070", "[::1]:7070", "localhost:7070") names a loopback
// address: localhost, an IPv4 address in 127.0.0.0/8, ::1, or ::ffff:127.x.y.z. Names that only
// look like one ("127.0.0.1.example.org:7070") are not.
bool IsLoopback(const std::string& host_port);

struct ClientTlsOptions {
  std::string ca_file;    // PEM root certificate(s) that verify the coordinator; set: use TLS
  std::string cert_file;  // PEM client certificate (mTLS); needs key_file and ca_file
  std::string key_file;   // PEM client private key
};

// Insecure credentials when no file is given, else TLS with the given files. InvalidArgument
// names the flag (--tls-ca, --tls-cert, --tls-key) of a file that is missing or unreadable, or a
// certificate without its key.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ClientCredentials(
    const ClientTlsOptions& options);

// The PEM text of `path`; InvalidArgument naming `flag` when it cannot be read.
absl::StatusOr<std::string> ReadPem(const std::string& path, const std::string& flag);

}  // namespace spheret::net
