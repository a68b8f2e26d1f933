#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "fileserver/backend.h"

// The serving side of salt://: Salt's roots backend over `file_roots`.
namespace brine::fileserver {

// SHA-256 (hex) of a file's bytes; nullopt when it cannot be read.
std::optional<std::string> hash_file(const std::string& path);
// SHA-256 (hex) of bytes.
std::string hash_bytes(std::string_view bytes);

// Salt's roots fileserver: saltenv -> directories, in order; a relative path
// is served from the first directory that has it. Files whose real path is
// outside their root (a symlink out of it) are left out and never read.
//
// Threading: every method is safe from any thread; list() and read() do
// file I/O (a walk, hashes of changed files): call them off I/O threads.
class roots final : public backend {
 public:
  // `list_cache_time`: how long a manifest is answered without looking at
  // the tree again (Salt's fileserver_list_cache_time); 0: every time.
  roots(std::map<std::string, std::vector<std::string>> file_roots,
        std::chrono::milliseconds list_cache_time);

  std::vector<std::string> envs() override;
  // The manifest of `saltenv` (an empty one for an unknown saltenv).
  std::shared_ptr<const manifest> list(const std::string& saltenv) override;
  // Where a checked relative path lives on disk, or nullopt (no such file
  // in `saltenv`, or it leaves its root).
  std::optional<std::string> locate(const std::string& saltenv, const std::string& path) const;

  using chunk = file_chunk;
  chunk read(const std::string& saltenv, const std::string& path, uint64_t offset,
             uint64_t max_bytes) override;

 private:
  struct hashed {
    uint64_t ino = 0, size = 0;
    int64_t mtime_ns = 0;
    std::string hash;
  };
  std::shared_ptr<const manifest> build(const std::string& saltenv);
  std::optional<std::string> hash_cached(const std::string& real, uint64_t ino, uint64_t size,
                                         int64_t mtime_ns);

  std::map<std::string, std::vector<std::string>> roots_;
  std::chrono::milliseconds ttl_;
  mutable std::mutex mu_;
  struct cached {
    std::shared_ptr<const manifest> m;
    std::chrono::steady_clock::time_point at;  // when its walk began
  };
  std::map<std::string, cached> manifests_;
  std::unordered_map<std::string, hashed> hashes_;  // by real path
  std::mutex build_mu_;                             // one walk at a time
};

}  // namespace brine::fileserver
