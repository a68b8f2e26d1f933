#include "pki/keys.h"

#include <filesystem>
#include <regex>
#include <sys/stat.h>

#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/sha.h>
#include <openssl/x509.h>

#include <cstdio>

#include "base/error.h"
#include "base/fs.h"
#include "support/temp_dir.h"

namespace brine::pki {
namespace {

TEST(keys, fingerprint_form) {
  auto kp = keypair::generate();
  std::string fp = kp.fingerprint();
  EXPECT_TRUE(std::regex_match(fp, std::regex("([0-9a-f]{2}:){31}[0-9a-f]{2}"))) << fp;
  EXPECT_NE(fp, keypair::generate().fingerprint());
}

// The Ed25519 fast paths (SPKI built by hand) must give exactly what
// OpenSSL's encoder gives: the same DER hashed, the same PEM text.
TEST(keys, fast_fingerprint_and_pem_match_openssl_encoder) {
  for (int i = 0; i < 20; ++i) {
    auto kp = keypair::generate();
    auto cert = kp.self_signed_cert("x");
    EVP_PKEY* key = X509_get0_pubkey(cert.get());
    ASSERT_NE(key, nullptr);
    unsigned char* der = nullptr;
    int len = i2d_PUBKEY(key, &der);
    ASSERT_EQ(len, 44);
    unsigned char digest[SHA256_DIGEST_LENGTH];
    SHA256(der, static_cast<size_t>(len), digest);
    OPENSSL_free(der);
    std::string expected;
    for (unsigned char b : digest) {
      char hex[4];
      std::snprintf(hex, sizeof hex, expected.empty() ? "%02x" : ":%02x", b);
      expected += hex;
    }
    EXPECT_EQ(fingerprint(key), expected);

    BIO* bio = BIO_new(BIO_s_mem());
    ASSERT_EQ(PEM_write_bio_PUBKEY(bio, key), 1);
    char* data = nullptr;
    long n = BIO_get_mem_data(bio, &data);
    EXPECT_EQ(public_pem(key), std::string(data, static_cast<size_t>(n)));
    BIO_free(bio);
  }
}

TEST(keys, fingerprint_survives_pem_round_trip) {
  auto kp = keypair::generate();
  auto pub = parse_public_pem(kp.public_pem());
  ASSERT_TRUE(pub);
  EXPECT_TRUE(is_ed25519(pub.get()));
  EXPECT_EQ(fingerprint(pub.get()), kp.fingerprint());
}

TEST(keys, created_once_with_private_mode_then_reloaded) {
  test::temp_dir tmp("brine-pki");
  const std::string& dir = tmp.path();
  auto a = keypair::load_or_create(dir, "minion");
  struct stat st {};
  ASSERT_EQ(::stat((dir + "/minion.pem").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_TRUE(base::file_exists(dir + "/minion.pub"));
  auto b = keypair::load_or_create(dir, "minion");
  EXPECT_EQ(a.fingerprint(), b.fingerprint());
}

TEST(keys, refuses_group_readable_private_key) {
  test::temp_dir tmp("brine-pki");
  const std::string& dir = tmp.path();
  keypair::load_or_create(dir, "master");
  ::chmod((dir + "/master.pem").c_str(), 0640);
  try {
    keypair::load_or_create(dir, "master");
    FAIL() << "a group-readable key was accepted";
  } catch (const base::error& e) {
    EXPECT_NE(std::string(e.what()).find("chmod 600"), std::string::npos) << e.what();
  }
}

TEST(keys, refuses_garbage_private_key) {
  test::temp_dir tmp("brine-pki");
  const std::string& dir = tmp.path();
  base::write_file_atomic(dir + "/master.pem", "not a key", 0600);
  EXPECT_THROW(keypair::load_or_create(dir, "master"), base::error);
}

TEST(keys, self_signed_cert_carries_the_key) {
  auto kp = keypair::generate();
  auto cert = kp.self_signed_cert("m1");
  ASSERT_TRUE(cert);
  EXPECT_EQ(fingerprint(X509_get0_pubkey(cert.get())), kp.fingerprint());
  EXPECT_EQ(X509_verify(cert.get(), kp.get()), 1);
}

}  // namespace
}  // namespace brine::pki

namespace brine::pki {
namespace {

TEST(keys, seed_round_trip) {
  auto kp = keypair::generate();
  std::string seed = kp.seed();
  ASSERT_EQ(seed.size(), 32u);
  auto again = keypair::from_seed(reinterpret_cast<const uint8_t*>(seed.data()));
  EXPECT_EQ(again.fingerprint(), kp.fingerprint());
}

}  // namespace
}  // namespace brine::pki
