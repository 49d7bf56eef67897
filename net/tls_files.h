// PEM files checked before gRPC sees them: gRPC reports a bad certificate or key only as a
// failed listen or a failed handshake, far from the file at fault. Each check names the flag and
// the file, and what is wrong with it.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace spheret::net {

// The text of `path` when it holds at least one PEM certificate and every PEM block in it is
// one; InvalidArgument naming `flag` and `path` otherwise (unreadable, not PEM, not a
// certificate).
absl::StatusOr<std::string> ReadCertificates(const std::string& path, const std::string& flag);

// The text of `path` when it holds a PEM private key; InvalidArgument naming `flag` and `path`
// otherwise.
absl::StatusOr<std::string> ReadPrivateKey(const std::string& path, const std::string& flag);

// OK when `key_pem` is the private key of the first certificate of `cert_pem`; InvalidArgument
// naming both flags and files otherwise.
absl::Status CheckKeyMatches(const std::string& cert_pem, const std::string& key_pem,
                             const std::string& cert_what, const std::string& key_what);

}  // namespace spheret::net
