#include "pki/keys.h"

#include <cstring>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include "base/error.h"
#include "base/fs.h"

namespace brine::pki {
namespace {

struct bio_free {
  void operator()(BIO* b) const { BIO_free(b); }
};
using bio_ptr = std::unique_ptr<BIO, bio_free>;

std::string bio_string(BIO* bio) {
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<size_t>(n));
}

// The DER SubjectPublicKeyInfo of an Ed25519 key is always these 12 bytes
// followed by the 32-byte key (RFC 8410). Built by hand it spares OpenSSL 3's
// encoder framework, which cost a tenth of the master's CPU in an auth storm
// (a fingerprint and a PEM for every connecting minion).
constexpr unsigned char k_ed25519_spki_prefix[12] = {0x30, 0x2a, 0x30, 0x05, 0x06, 0x03,
                                                     0x2b, 0x65, 0x70, 0x03, 0x21, 0x00};
constexpr size_t k_ed25519_spki_size = sizeof k_ed25519_spki_prefix + 32;

// False for other key types (the callers fall back to OpenSSL's encoder).
bool ed25519_spki(EVP_PKEY* key, unsigned char (&out)[k_ed25519_spki_size]) {
  if (!key || EVP_PKEY_get_id(key) != EVP_PKEY_ED25519) return false;
  size_t len = 32;
  if (EVP_PKEY_get_raw_public_key(key, out + sizeof k_ed25519_spki_prefix, &len) != 1 ||
      len != 32) {
    ERR_clear_error();
    return false;
  }
  std::memcpy(out, k_ed25519_spki_prefix, sizeof k_ed25519_spki_prefix);
  return true;
}

}  // namespace

std::string openssl_error() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? "unknown OpenSSL error" : out;
}

keypair keypair::generate() {
  pkey_ptr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519"));
  if (!key) throw base::error("cannot generate an Ed25519 key: " + openssl_error());
  return keypair(std::move(key));
}

keypair keypair::load_or_create(const std::string& dir, const std::string& name) {
  std::string priv = dir + "/" + name + ".pem";
  std::string pub = dir + "/" + name + ".pub";
  if (!base::file_exists(priv)) {
    keypair kp = generate();
    base::write_file_atomic(priv, kp.private_pem(), 0600);
    base::write_file_atomic(pub, kp.public_pem(), 0644);
    return kp;
  }
  return load(dir, name);
}

keypair keypair::load(const std::string& dir, const std::string& name) {
  std::string priv = dir + "/" + name + ".pem";
  std::string pub = dir + "/" + name + ".pub";
  if (!base::file_exists(priv)) throw base::error(priv + ": no such key");
  base::require_private(priv);
  std::string pem = base::read_file(priv);
  bio_ptr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  pkey_ptr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (!key) {
    throw base::error(priv + ": not a PEM private key (" + openssl_error() +
                      "); remove it to have a new key generated");
  }
  if (!is_ed25519(key.get())) {
    throw base::error(priv + ": not an Ed25519 key; brine identities are Ed25519, remove it to "
                             "have a new key generated");
  }
  keypair kp(std::move(key));
  if (!base::file_exists(pub)) base::write_file_atomic(pub, kp.public_pem(), 0644);
  return kp;
}

keypair keypair::from_seed(const uint8_t* seed32) {
  pkey_ptr key(EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, seed32, 32));
  if (!key) throw base::error("cannot load an Ed25519 seed: " + openssl_error());
  return keypair(std::move(key));
}

std::string keypair::seed() const {
  std::string out(32, '\0');
  size_t len = out.size();
  if (EVP_PKEY_get_raw_private_key(key_.get(), reinterpret_cast<unsigned char*>(out.data()),
                                   &len) != 1 ||
      len != 32) {
    throw base::error("cannot export an Ed25519 seed: " + openssl_error());
  }
  return out;
}

std::string keypair::public_pem() const { return pki::public_pem(key_.get()); }

std::string keypair::private_pem() const {
  bio_ptr bio(BIO_new(BIO_s_mem()));
  if (!PEM_write_bio_PrivateKey(bio.get(), key_.get(), nullptr, nullptr, 0, nullptr, nullptr)) {
    throw base::error("cannot encode private key: " + openssl_error());
  }
  return bio_string(bio.get());
}

std::string keypair::fingerprint() const { return pki::fingerprint(key_.get()); }

x509_ptr keypair::self_signed_cert(const std::string& common_name) const {
  x509_ptr cert(X509_new());
  if (!cert) throw base::error("cannot create certificate: " + openssl_error());
  X509_set_version(cert.get(), 2);
  uint64_t serial = 0;
  RAND_bytes(reinterpret_cast<unsigned char*>(&serial), sizeof serial);
  ASN1_INTEGER_set_uint64(X509_get_serialNumber(cert.get()), serial >> 1);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 60L * 60 * 24 * 365 * 50);
  X509_set_pubkey(cert.get(), key_.get());
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>(common_name.c_str()), -1, -1,
                             0);
  X509_set_issuer_name(cert.get(), name);
  if (X509_sign(cert.get(), key_.get(), nullptr) == 0) {
    throw base::error("cannot sign certificate: " + openssl_error());
  }
  return cert;
}

std::string fingerprint(EVP_PKEY* key) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  unsigned char spki[k_ed25519_spki_size];
  if (ed25519_spki(key, spki)) {
    SHA256(spki, sizeof spki, digest);
  } else {
    unsigned char* der = nullptr;
    int len = i2d_PUBKEY(key, &der);
    if (len <= 0) return {};
    SHA256(der, static_cast<size_t>(len), digest);
    OPENSSL_free(der);
  }
  static const char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(SHA256_DIGEST_LENGTH * 3);
  for (unsigned char b : digest) {
    if (!out.empty()) out += ':';
    out += hex[b >> 4];
    out += hex[b & 15];
  }
  return out;
}

std::string public_pem(EVP_PKEY* key) {
  unsigned char spki[k_ed25519_spki_size];
  if (ed25519_spki(key, spki)) {
    // 44 bytes are 60 base64 characters: one PEM line.
    unsigned char b64[64];
    int n = EVP_EncodeBlock(b64, spki, sizeof spki);
    return "-----BEGIN PUBLIC KEY-----\n" +
           std::string(reinterpret_cast<const char*>(b64), static_cast<size_t>(n)) +
           "\n-----END PUBLIC KEY-----\n";
  }
  bio_ptr bio(BIO_new(BIO_s_mem()));
  if (!PEM_write_bio_PUBKEY(bio.get(), key)) {
    throw base::error("cannot encode public key: " + openssl_error());
  }
  return bio_string(bio.get());
}

pkey_ptr parse_public_pem(const std::string& pem) {
  bio_ptr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  pkey_ptr key(PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr));
  if (!key) ERR_clear_error();
  return key;
}

bool is_ed25519(EVP_PKEY* key) { return key && EVP_PKEY_get_id(key) == EVP_PKEY_ED25519; }

std::string keypair::sign(std::string_view data) const {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  size_t len = 64;
  std::string sig(len, '\0');
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key_.get()) != 1 ||
      EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len,
                     reinterpret_cast<const unsigned char*>(data.data()), data.size()) != 1) {
    throw base::error("cannot sign with an Ed25519 key: " + openssl_error());
  }
  sig.resize(len);
  return sig;
}

bool verify(EVP_PKEY* key, std::string_view data, std::string_view signature) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!ctx || EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, key) != 1) {
    openssl_error();
    return false;
  }
  bool ok = EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()),
                             signature.size(), reinterpret_cast<const unsigned char*>(data.data()),
                             data.size()) == 1;
  if (!ok) openssl_error();  // clears the queue
  return ok;
}

}  // namespace brine::pki
