#include "base/sha256.h"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <stdexcept>
#include <vector>

#include "absl/strings/escaping.h"

namespace spheret {

std::string Sha256Hex(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(data.data(), data.size(), digest, &length, EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("OpenSSL SHA-256 failed");  // only on a broken libcrypto
  }
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(digest), length));
}

std::string RandomHex(int bytes) {
  std::vector<unsigned char> buffer(bytes);
  if (RAND_bytes(buffer.data(), bytes) != 1) throw std::runtime_error("OpenSSL RAND_bytes failed");
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(buffer.data()), buffer.size()));
}

}  // namespace spheret
