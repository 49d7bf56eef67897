// SHA-256 digests (OpenSSL), as lowercase hex: trial keys and stored token hashes.
#pragma once

#include <string>
#include <string_view>

namespace spheret {

// The 64-character lowercase hex SHA-256 of `data`.
std::string Sha256Hex(std::string_view data);

// `bytes` random bytes from the OS's CSPRNG, as lowercase hex (2 * bytes characters).
std::string RandomHex(int bytes);

}  // namespace spheret
