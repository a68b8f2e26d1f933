#pragma once

#include <cstddef>
#include <memory>
#include <string>

// Digests by Salt's hash names (md5, sha1, sha224, sha256, sha384, sha512),
// computed by OpenSSL, as lower-case hex: file.get_hash, the source sums of
// file and archive states, the cache of remote sources.
namespace brine::modules {

class digester {
 public:
  // Throws base::error naming the type when it is not one of Salt's six.
  explicit digester(const std::string& hash_type);
  ~digester();
  digester(const digester&) = delete;
  digester& operator=(const digester&) = delete;

  void update(const void* data, std::size_t size);
  // The digest of what was given; the digester is spent.
  std::string hex();

 private:
  struct state;
  std::unique_ptr<state> state_;
};

// The hex digest of a file ("" if it cannot be read or the type is not
// one of Salt's). Blocking: for a worker thread or a small file.
std::string file_digest(const std::string& path, const std::string& hash_type);

}  // namespace brine::modules
