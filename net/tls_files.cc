#include "net/tls_files.h"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <memory>

#include "absl/strings/str_cat.h"
#include "net/channel_security.h"

namespace spheret::net {
namespace {

struct Free {
  void operator()(BIO* bio) const { BIO_free(bio); }
  void operator()(X509* cert) const { X509_free(cert); }
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
using Bio = std::unique_ptr<BIO, Free>;
using Cert = std::unique_ptr<X509, Free>;
using Key = std::unique_ptr<EVP_PKEY, Free>;

Bio MemoryBio(const std::string& text) {
  return Bio(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

// An encrypted key is refused rather than prompted for: nobody answers a coordinator's prompt.
int NoPassphrase(char*, int, int, void*) { return 0; }

Key ParseKey(const std::string& pem) {
  Bio bio = MemoryBio(pem);
  return Key(PEM_read_bio_PrivateKey(bio.get(), nullptr, NoPassphrase, nullptr));
}

Cert FirstCertificate(const std::string& pem) {
  Bio bio = MemoryBio(pem);
  return Cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
}

// How many PEM certificates `pem` holds, or -1 when a block is not one.
int CountCertificates(const std::string& pem) {
  Bio bio = MemoryBio(pem);
  int count = 0;
  for (;;) {
    Cert cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
    if (cert == nullptr) break;
    ++count;
  }
  // The loop ends at the end of the text (PEM_R_NO_START_LINE) or at a block that is not a
  // certificate.
  const unsigned long error = ERR_peek_last_error();
  const bool at_end =
      ERR_GET_LIB(error) == ERR_LIB_PEM && ERR_GET_REASON(error) == PEM_R_NO_START_LINE;
  ERR_clear_error();
  return at_end ? count : -1;
}

}  // namespace

absl::StatusOr<std::string> ReadCertificates(const std::string& path, const std::string& flag) {
  absl::StatusOr<std::string> pem = ReadPem(path, flag);
  if (!pem.ok()) return pem.status();
  if (CountCertificates(*pem) <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " ", path,
        ": not a PEM certificate (expected '-----BEGIN CERTIFICATE-----' blocks, each a valid "
        "X.509 certificate)"));
  }
  return pem;
}

absl::StatusOr<std::string> ReadPrivateKey(const std::string& path, const std::string& flag) {
  absl::StatusOr<std::string> pem = ReadPem(path, flag);
  if (!pem.ok()) return pem.status();
  Key key = ParseKey(*pem);
  ERR_clear_error();
  if (key == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " ", path,
                     ": not a PEM private key, or one encrypted with a passphrase (expected an "
                     "unencrypted '-----BEGIN PRIVATE "
                     "KEY-----' or '-----BEGIN RSA/EC PRIVATE KEY-----' block)"));
  }
  return pem;
}

absl::Status CheckKeyMatches(const std::string& cert_pem, const std::string& key_pem,
                             const std::string& cert_what, const std::string& key_what) {
  Cert cert = FirstCertificate(cert_pem);
  Key key = ParseKey(key_pem);
  const bool match =
      cert != nullptr && key != nullptr && X509_check_private_key(cert.get(), key.get()) == 1;
  ERR_clear_error();
  if (match) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(key_what, " is not the private key of ", cert_what,
                   " (the certificate's public key differs: a key from another pair?)"));
}

}  // namespace spheret::net
