#include "modules/digest.h"

#include <openssl/evp.h>

#include <fstream>
#include <set>
#include <vector>

#include "base/error.h"

namespace brine::modules {

struct digester::state {
  EVP_MD_CTX* ctx = nullptr;
  ~state() { EVP_MD_CTX_free(ctx); }
};

digester::digester(const std::string& hash_type) : state_(std::make_unique<state>()) {
  static const std::set<std::string> k_types = {"md5",    "sha1",   "sha224",
                                                "sha256", "sha384", "sha512"};
  if (!k_types.contains(hash_type)) {
    throw base::error("Invalid hash type: " + hash_type +
                      " (md5, sha1, sha224, sha256, sha384 or sha512)");
  }
  const EVP_MD* md = EVP_get_digestbyname(hash_type.c_str());
  if (md == nullptr) throw base::error("hash type " + hash_type + " is not available in OpenSSL");
  state_->ctx = EVP_MD_CTX_new();
  if (state_->ctx == nullptr || EVP_DigestInit_ex(state_->ctx, md, nullptr) != 1) {
    throw base::error("cannot start a " + hash_type + " digest");
  }
}

digester::~digester() = default;

void digester::update(const void* data, std::size_t size) {
  EVP_DigestUpdate(state_->ctx, data, size);
}

std::string digester::hex() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(state_->ctx, digest, &len);
  static const char* k_digits = "0123456789abcdef";
  std::string out;
  out.reserve(len * 2);
  for (unsigned i = 0; i < len; ++i) {
    out += k_digits[digest[i] >> 4];
    out += k_digits[digest[i] & 15];
  }
  return out;
}

std::string file_digest(const std::string& path, const std::string& hash_type) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  try {
    digester d(hash_type);
    std::vector<char> buf(1 << 16);
    while (in) {
      in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
      if (in.gcount() > 0) d.update(buf.data(), static_cast<std::size_t>(in.gcount()));
    }
    if (in.bad()) return "";
    return d.hex();
  } catch (const base::error&) {
    return "";
  }
}

}  // namespace brine::modules
