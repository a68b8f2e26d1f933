#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <openssl/evp.h>
#include <openssl/x509.h>

namespace brine::pki {

struct evp_pkey_free {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct x509_free {
  void operator()(X509* c) const { X509_free(c); }
};
using pkey_ptr = std::unique_ptr<EVP_PKEY, evp_pkey_free>;
using x509_ptr = std::unique_ptr<X509, x509_free>;

// An Ed25519 identity. The identity is the key: its fingerprint is the SHA-256
// of the DER SubjectPublicKeyInfo, written "aa:bb:…" (32 bytes, lowercase).
class keypair {
 public:
  static keypair generate();
  // Loads `<dir>/<name>.pem` (private) or, when it does not exist, generates a
  // key and writes it (mode 0600) with `<dir>/<name>.pub` (public PEM, 0644).
  // Refuses a private key readable by group or others. Throws base::error.
  static keypair load_or_create(const std::string& dir, const std::string& name);
  // Loads `<dir>/<name>.pem`; throws base::error when it does not exist (the
  // message names the file; the caller adds how to make it).
  static keypair load(const std::string& dir, const std::string& name);
  // From / to the 32-byte Ed25519 seed (compact caches of many keys, e.g. the swarm's).
  static keypair from_seed(const uint8_t* seed32);
  std::string seed() const;

  EVP_PKEY* get() const { return key_.get(); }
  std::string public_pem() const;
  std::string private_pem() const;
  std::string fingerprint() const;
  // An Ed25519 signature of `data` (64 bytes).
  std::string sign(std::string_view data) const;

  // A self-signed X.509 wrapper around the key, for the TLS handshake only:
  // nothing about it but the key is ever trusted.
  x509_ptr self_signed_cert(const std::string& common_name) const;

 private:
  explicit keypair(pkey_ptr key) : key_(std::move(key)) {}
  pkey_ptr key_;
};

std::string fingerprint(EVP_PKEY* key);
std::string public_pem(EVP_PKEY* key);
// Parses a public key PEM; nullptr when it is not one.
pkey_ptr parse_public_pem(const std::string& pem);
bool is_ed25519(EVP_PKEY* key);
// Whether `signature` is `key`'s Ed25519 signature of `data`.
bool verify(EVP_PKEY* key, std::string_view data, std::string_view signature);

// The last OpenSSL error as text (and clears the queue).
std::string openssl_error();

}  // namespace brine::pki
