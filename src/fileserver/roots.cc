#include "fileserver/roots.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <set>

#include "fileserver/path.h"

namespace brine::fileserver {
namespace {

namespace fs = std::filesystem;

// OpenSSL 3 looks EVP_sha256() up in its provider tables at every
// DigestInit (a third of hashing a small file); fetched once, it is not.
const EVP_MD* sha256_md() {
  static EVP_MD* md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  return md != nullptr ? md : EVP_sha256();
}

class sha256 {
 public:
  sha256() : ctx_(EVP_MD_CTX_new(), &EVP_MD_CTX_free) {
    EVP_DigestInit_ex(ctx_.get(), sha256_md(), nullptr);
  }
  void update(const void* p, size_t n) { EVP_DigestUpdate(ctx_.get(), p, n); }
  std::string hex() {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx_.get(), digest, &len);
    static constexpr char k_hex[] = "0123456789abcdef";
    std::string out;
    out.reserve(len * 2);
    for (unsigned i = 0; i < len; ++i) {
      out += k_hex[digest[i] >> 4];
      out += k_hex[digest[i] & 15];
    }
    return out;
  }

 private:
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx_;
};

// Whether `real` (a canonical path) is `root` or below it.
bool inside(const std::string& real, const std::string& root) {
  if (real == root) return true;
  if (root == "/") return true;
  return real.size() > root.size() && real.compare(0, root.size(), root) == 0 &&
         real[root.size()] == '/';
}

}  // namespace

std::optional<std::string> hash_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  sha256 h;
  std::array<char, 65536> buf;
  for (;;) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      ::close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    h.update(buf.data(), static_cast<size_t>(n));
  }
  ::close(fd);
  return h.hex();
}

std::string hash_bytes(std::string_view bytes) {
  sha256 h;
  h.update(bytes.data(), bytes.size());
  return h.hex();
}

roots::roots(std::map<std::string, std::vector<std::string>> file_roots,
             std::chrono::milliseconds list_cache_time)
    : roots_(std::move(file_roots)), ttl_(list_cache_time) {}

std::vector<std::string> roots::envs() {
  std::vector<std::string> out;
  for (const auto& [env, dirs] : roots_) out.push_back(env);
  return out;
}

std::shared_ptr<const manifest> roots::list(const std::string& saltenv) {
  auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(mu_);
    auto it = manifests_.find(saltenv);
    if (it != manifests_.end() && ttl_.count() > 0 && now - it->second.at < ttl_) {
      return it->second.m;
    }
  }
  std::lock_guard walk(build_mu_);
  {
    // A walk that began after this request arrived saw everything the
    // request could expect: requests that queued behind one walk share the
    // next.
    std::lock_guard lock(mu_);
    auto it = manifests_.find(saltenv);
    if (it != manifests_.end() && it->second.at >= now) return it->second.m;
  }
  auto started = std::chrono::steady_clock::now();
  auto m = build(saltenv);
  std::lock_guard lock(mu_);
  manifests_[saltenv] = {m, started};
  return m;
}

std::optional<std::string> roots::hash_cached(const std::string& real, uint64_t ino, uint64_t size,
                                              int64_t mtime_ns) {
  {
    std::lock_guard lock(mu_);
    auto it = hashes_.find(real);
    if (it != hashes_.end() && it->second.ino == ino && it->second.size == size &&
        it->second.mtime_ns == mtime_ns) {
      return it->second.hash;
    }
  }
  auto h = hash_file(real);
  if (!h) return std::nullopt;
  std::lock_guard lock(mu_);
  hashes_[real] = {ino, size, mtime_ns, *h};
  return h;
}

std::shared_ptr<const manifest> roots::build(const std::string& saltenv) {
  auto dirs = roots_.find(saltenv);
  if (dirs == roots_.end()) return make_manifest(saltenv, {}, {});
  std::map<std::string, entry> files;
  // Every directory, empty ones too (file.recurse's include_empty).
  std::set<std::string> dir_set;
  for (const auto& dir : dirs->second) {
    std::error_code ec;
    fs::path root_real = fs::canonical(dir, ec);
    if (ec) continue;  // a root that does not exist serves nothing, as in Salt
    std::string root = root_real.string();
    fs::recursive_directory_iterator it(root_real, fs::directory_options::follow_directory_symlink,
                                        ec);
    for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      std::error_code fec;
      if (it->is_directory(fec)) {
        // A directory symlink that leads out of the root is not walked.
        if (it->is_symlink(fec) && !inside(fs::canonical(it->path(), fec).string(), root)) {
          it.disable_recursion_pending();
          continue;
        }
        std::string rel = it->path().lexically_relative(root_real).generic_string();
        if (!fec && check_path(rel).error.empty()) dir_set.insert(rel);
        continue;
      }
      if (!it->is_regular_file(fec)) continue;
      std::string rel = it->path().lexically_relative(root_real).generic_string();
      if (fec || files.count(rel)) continue;  // an earlier root has it
      if (!check_path(rel).error.empty()) continue;
      std::string real = fs::canonical(it->path(), fec).string();
      if (fec || !inside(real, root)) continue;
      struct stat st {};
      if (::stat(real.c_str(), &st) != 0) continue;
      int64_t mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
      auto h = hash_cached(real, st.st_ino, static_cast<uint64_t>(st.st_size), mtime_ns);
      if (!h) continue;  // unreadable: not served
      files.emplace(rel, entry{rel, *h, static_cast<uint64_t>(st.st_size), st.st_mode & 07777u});
    }
  }
  return make_manifest(saltenv, std::move(files), std::move(dir_set));
}

std::optional<std::string> roots::locate(const std::string& saltenv,
                                         const std::string& path) const {
  auto dirs = roots_.find(saltenv);
  if (dirs == roots_.end()) return std::nullopt;
  auto checked = check_path(path);
  if (!checked.error.empty()) return std::nullopt;
  for (const auto& dir : dirs->second) {
    std::error_code ec;
    fs::path root_real = fs::canonical(dir, ec);
    if (ec) continue;
    fs::path candidate = root_real / checked.path;
    if (!fs::is_regular_file(candidate, ec)) continue;
    std::string real = fs::canonical(candidate, ec).string();
    if (ec || !inside(real, root_real.string())) return std::nullopt;  // Salt would not serve it
    return real;
  }
  return std::nullopt;
}

roots::chunk roots::read(const std::string& saltenv, const std::string& path, uint64_t offset,
                         uint64_t max_bytes) {
  chunk out;
  auto real = locate(saltenv, path);
  if (!real) {
    out.error = "no such file in saltenv " + saltenv;
    return out;
  }
  int fd = ::open(real->c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    out.error = "cannot be read";
    return out;
  }
  struct stat st {};
  ::fstat(fd, &st);
  out.size = static_cast<uint64_t>(st.st_size);
  out.mode = st.st_mode & 07777u;
  int64_t mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  ::close(fd);
  auto h = hash_cached(*real, st.st_ino, out.size, mtime_ns);
  if (!h) {
    out.error = "cannot be read";
    return out;
  }
  out.hash = *h;
  if (offset > out.size) offset = out.size;
  uint64_t n = std::min<uint64_t>(max_bytes, out.size - offset);
  out.data.resize(n);
  fd = ::open(real->c_str(), O_RDONLY | O_CLOEXEC);
  ssize_t got = fd < 0 ? -1 : ::pread(fd, out.data.data(), n, static_cast<off_t>(offset));
  if (fd >= 0) ::close(fd);
  if (got < 0) {
    out.error = "cannot be read";
    out.data.clear();
    return out;
  }
  out.data.resize(static_cast<size_t>(got));
  return out;
}

}  // namespace brine::fileserver
