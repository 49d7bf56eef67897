#include "net/channel_security.h"

#include <arpa/inet.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "net/tls_files.h"

namespace spheret::net {
namespace {

std::string HostOf(const std::string& host_port) {
  if (!host_port.empty() && host_port.front() == '[') {
    const size_t close = host_port.find(']');
    return close == std::string::npos ? "" : host_port.substr(1, close - 1);
  }
  const size_t colon = host_port.rfind(':');
  return colon == std::string::npos ? host_port : host_port.substr(0, colon);
}

}  // namespace

bool IsLoopback(const std::string& host_port) {
  const std::string host = HostOf(host_port);
  if (host == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6{};
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;
}

absl::StatusOr<std::string> ReadPem(const std::string& path, const std::string& flag) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(flag, " ", path, ": cannot read it"));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ClientCredentials(
    const ClientTlsOptions& options) {
  if (options.ca_file.empty() && options.cert_file.empty() && options.key_file.empty()) {
    return grpc::InsecureChannelCredentials();
  }
  if (options.cert_file.empty() != options.key_file.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  if (options.ca_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls-cert needs --tls-ca (the CA that signed the coordinator's certificate)");
  }
  grpc::SslCredentialsOptions ssl;
  absl::StatusOr<std::string> ca = ReadCertificates(options.ca_file, "--tls-ca");
  if (!ca.ok()) return ca.status();
  ssl.pem_root_certs = *ca;
  if (!options.cert_file.empty()) {
    absl::StatusOr<std::string> cert = ReadCertificates(options.cert_file, "--tls-cert");
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadPrivateKey(options.key_file, "--tls-key");
    if (!key.ok()) return key.status();
    absl::Status match = CheckKeyMatches(*cert, *key, "--tls-cert " + options.cert_file,
                                         "--tls-key " + options.key_file);
    if (!match.ok()) return match;
    ssl.pem_cert_chain = *cert;
    ssl.pem_private_key = *key;
  }
  return grpc::SslCredentials(ssl);
}

}  // namespace spheret::net
