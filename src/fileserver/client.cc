#include "fileserver/client.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "base/error.h"
#include "fileserver/path.h"
#include "fileserver/serve.h"

namespace brine::fileserver {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

int64_t mtime_ns_of(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

std::shared_ptr<const manifest> manifest_of(const json& body, const std::string& saltenv) {
  auto m = std::make_shared<manifest>();
  m->saltenv = saltenv;
  m->revision = body.value("revision", "");
  const json& files = body.contains("files") ? body["files"] : json::array();
  if (!files.is_array()) throw base::error("file server: a list reply without a file list");
  for (const auto& f : files) {
    if (!f.is_array() || f.size() != 4 || !f[0].is_string() || !f[1].is_string() ||
        !is_count(f[2]) || !is_count(f[3])) {
      throw base::error("file server: a malformed file entry in a list reply");
    }
    auto checked = check_path(f[0].get<std::string>());
    if (!checked.error.empty() || checked.path != f[0].get<std::string>()) {
      throw base::error("file server: the master listed a path that is refused: " +
                        f[0].get<std::string>());
    }
    m->files.push_back({checked.path, f[1].get<std::string>(), f[2].get<uint64_t>(),
                        static_cast<uint32_t>(f[3].get<uint64_t>() & 07777u)});
  }
  std::sort(m->files.begin(), m->files.end(),
            [](const entry& a, const entry& b) { return a.path < b.path; });
  if (body.contains("dirs") && body["dirs"].is_array()) {
    for (const auto& d : body["dirs"]) {
      if (d.is_string() && check_path(d.get<std::string>()).error.empty()) {
        m->dirs.push_back(d.get<std::string>());
      }
    }
  }
  return m;
}

}  // namespace

// ---- local -------------------------------------------------------------

local_client::local_client(std::map<std::string, std::vector<std::string>> file_roots)
    : dirs_(file_roots), roots_(std::move(file_roots), std::chrono::milliseconds(0)) {}

asio::awaitable<std::vector<std::string>> local_client::envs() { co_return roots_.envs(); }

asio::awaitable<std::shared_ptr<const manifest>> local_client::list(std::string saltenv) {
  co_return roots_.list(saltenv);
}

asio::awaitable<std::vector<cached_file>> local_client::cache(std::string saltenv,
                                                              std::vector<std::string> paths) {
  std::vector<cached_file> out;
  for (const auto& p : paths) {
    cached_file f;
    f.path = p;
    if (auto real = roots_.locate(saltenv, p)) {
      f.local = *real;
      struct stat st {};
      if (::stat(real->c_str(), &st) == 0) f.mode = st.st_mode & 07777u;
      f.hash = hash_file(*real).value_or("");
    } else {
      f.error = "no such file in saltenv " + saltenv;
    }
    out.push_back(std::move(f));
  }
  co_return out;
}

asio::awaitable<std::vector<std::string>> local_client::tree(std::string saltenv) {
  auto it = dirs_.find(saltenv);
  co_return it == dirs_.end() ? std::vector<std::string>{} : it->second;
}

std::vector<std::string> local_client::dirs_of(const std::string& saltenv) const {
  auto it = dirs_.find(saltenv);
  return it == dirs_.end() ? std::vector<std::string>{} : it->second;
}

// ---- remote ------------------------------------------------------------

remote_client::remote_client(std::string cache_dir, file_transport transport)
    : dir_(std::move(cache_dir)), transport_(std::move(transport)) {}

client_stats remote_client::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

std::string remote_client::local_path(const std::string& saltenv, const std::string& path) const {
  return dir_ + "/" + saltenv + "/" + path;
}

asio::awaitable<std::vector<std::string>> remote_client::envs() {
  {
    std::lock_guard lock(mu_);
    ++stats_.requests;
  }
  json request = {{"op", "envs"}};
  json reply = co_await transport_(std::move(request));
  std::vector<std::string> out;
  if (reply.contains("envs") && reply["envs"].is_array()) {
    for (const auto& e : reply["envs"]) {
      if (e.is_string() && valid_saltenv(e.get<std::string>())) out.push_back(e);
    }
  }
  co_return out;
}

asio::awaitable<std::shared_ptr<const manifest>> remote_client::list(std::string saltenv) {
  if (!valid_saltenv(saltenv)) throw base::error("file server: invalid saltenv '" + saltenv + "'");
  json request = {{"op", "list"}, {"saltenv", saltenv}};
  std::shared_ptr<const manifest> have;
  {
    std::lock_guard lock(mu_);
    ++stats_.requests;
    auto it = manifests_.find(saltenv);
    if (it != manifests_.end()) {
      have = it->second;
      request["revision"] = have->revision;
    }
  }
  json reply = co_await transport_(std::move(request));
  if (reply.contains("error")) throw base::error("file server: " + reply.value("error", "?"));
  if (have && reply.value("unchanged", false)) co_return have;
  auto m = manifest_of(reply, saltenv);
  std::lock_guard lock(mu_);
  manifests_[saltenv] = m;
  co_return m;
}

bool remote_client::current(const std::string& saltenv, const entry& e) {
  std::string local = local_path(saltenv, e.path);
  struct stat st {};
  if (::stat(local.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size != e.size) return false;
  {
    std::lock_guard lock(mu_);
    auto it = known_.find(local);
    if (it != known_.end() && it->second.size == size && it->second.mtime_ns == mtime_ns_of(st)) {
      return it->second.hash == e.hash;
    }
  }
  auto h = hash_file(local);
  if (!h) return false;
  std::lock_guard lock(mu_);
  known_[local] = {*h, size, mtime_ns_of(st)};
  return *h == e.hash;
}

asio::awaitable<void> remote_client::fetch(std::string saltenv, std::vector<entry> wanted,
                                           std::map<std::string, std::string>* errors) {
  struct progress {
    entry e;
    uint64_t offset = 0;
    int fd = -1;
    std::string part;
  };
  std::vector<progress> todo;
  for (auto& e : wanted) todo.push_back({std::move(e), 0, -1, ""});
  auto fail = [&](progress& p, const std::string& why) {
    if (p.fd >= 0) ::close(p.fd);
    p.fd = -1;
    if (!p.part.empty()) ::unlink(p.part.c_str());
    (*errors)[p.e.path] = why;
    p.offset = p.e.size + 1;  // done (failed)
  };
  auto finish = [&](progress& p) {
    ::close(p.fd);
    p.fd = -1;
    auto h = hash_file(p.part);
    if (!h || *h != p.e.hash) {
      ::unlink(p.part.c_str());
      (*errors)[p.e.path] = "changed on the master while it was fetched";
      p.offset = p.e.size + 1;
      return;
    }
    std::string local = local_path(saltenv, p.e.path);
    ::chmod(p.part.c_str(), (p.e.mode & 0777u) | 0600u);
    if (::rename(p.part.c_str(), local.c_str()) != 0) {
      (*errors)[p.e.path] = "cannot be written to the cache: " + local;
      ::unlink(p.part.c_str());
    } else {
      struct stat st {};
      ::stat(local.c_str(), &st);
      std::lock_guard lock(mu_);
      known_[local] = {p.e.hash, p.e.size, mtime_ns_of(st)};
      ++stats_.files_fetched;
    }
    p.offset = p.e.size + 1;
  };
  for (auto& p : todo) {
    std::string local = local_path(saltenv, p.e.path);
    std::error_code ec;
    fs::create_directories(fs::path(local).parent_path(), ec);
    p.part = local + ".brine-part";
    p.fd = ::open(p.part.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (p.fd < 0) fail(p, "cannot be written to the cache: " + p.part);
    if (p.fd >= 0 && p.e.size == 0) finish(p);
  }
  for (;;) {
    json files = json::array();
    uint64_t budget = 0;
    for (auto& p : todo) {
      if (p.offset >= p.e.size) continue;
      files.push_back(json::array({p.e.path, p.offset}));
      budget += p.e.size - p.offset;
      if (budget >= k_batch_bytes) break;
    }
    if (files.empty()) break;
    json request = {{"op", "get"}, {"saltenv", saltenv}, {"files", std::move(files)},
                    {"max_bytes", k_batch_bytes}};
    {
      std::lock_guard lock(mu_);
      ++stats_.requests;
    }
    json reply = co_await transport_(std::move(request));
    if (reply.contains("error")) throw base::error("file server: " + reply.value("error", "?"));
    bool progressed = false;
    const json& got = reply.contains("files") ? reply["files"] : json::array();
    for (const auto& f : got) {
      if (!f.is_object() || !f.contains("path") || !f["path"].is_string()) continue;
      std::string path = f["path"];
      auto it = std::find_if(todo.begin(), todo.end(), [&](const progress& p) {
        return p.e.path == path && p.offset < p.e.size;
      });
      if (it == todo.end()) continue;
      if (f.contains("error")) {
        fail(*it, f.value("error", "?"));
        progressed = true;
        continue;
      }
      if (f.value("hash", "") != it->e.hash) {
        fail(*it, "changed on the master while it was fetched");
        progressed = true;
        continue;
      }
      if (!f.contains("data") || !f["data"].is_binary() || f.value("offset", uint64_t{0}) != it->offset) {
        fail(*it, "a malformed file_reply");
        progressed = true;
        continue;
      }
      const auto& data = f["data"].get_binary();
      if (data.empty()) continue;
      if (it->offset + data.size() > it->e.size) {
        fail(*it, "the master sent more bytes than the file has");
        progressed = true;
        continue;
      }
      if (::pwrite(it->fd, data.data(), data.size(), static_cast<off_t>(it->offset)) !=
          static_cast<ssize_t>(data.size())) {
        fail(*it, "cannot be written to the cache: " + it->part);
        progressed = true;
        continue;
      }
      it->offset += data.size();
      progressed = true;
      {
        std::lock_guard lock(mu_);
        stats_.bytes_fetched += data.size();
      }
      if (it->offset == it->e.size) finish(*it);
    }
    if (!progressed) {
      for (auto& p : todo) {
        if (p.offset < p.e.size) fail(p, "the master sent none of it");
      }
    }
  }
}

asio::awaitable<std::vector<cached_file>> remote_client::cache(std::string saltenv,
                                                               std::vector<std::string> paths) {
  return cache_with(std::move(saltenv), std::move(paths), nullptr);
}

asio::awaitable<std::vector<cached_file>> remote_client::cache_with(
    std::string saltenv, std::vector<std::string> paths, std::shared_ptr<const manifest> m) {
  std::vector<cached_file> out(paths.size());
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (!m || attempt > 0) m = co_await list(saltenv);
    std::vector<entry> wanted;
    std::set<std::string> asked;
    for (size_t i = 0; i < paths.size(); ++i) {
      if (!out[i].local.empty()) continue;
      out[i].path = paths[i];
      out[i].error.clear();
      const entry* e = m->find(paths[i]);
      if (e == nullptr) {
        out[i].error = "no such file in saltenv " + saltenv;
        continue;
      }
      if (current(saltenv, *e)) {
        std::lock_guard lock(mu_);
        ++stats_.cache_hits;
      } else if (asked.insert(e->path).second) {
        wanted.push_back(*e);
      }
    }
    std::map<std::string, std::string> errors;
    if (!wanted.empty()) co_await fetch(saltenv, std::move(wanted), &errors);
    bool retry = false;
    for (size_t i = 0; i < paths.size(); ++i) {
      if (!out[i].local.empty() || !out[i].error.empty()) continue;
      const entry* e = m->find(paths[i]);
      if (auto err = errors.find(paths[i]); err != errors.end()) {
        out[i].error = err->second;
        retry = retry || err->second.starts_with("changed on the master");
        continue;
      }
      out[i].local = local_path(saltenv, e->path);
      out[i].hash = e->hash;
      out[i].mode = e->mode;
    }
    if (!retry) break;
  }
  co_return out;
}

asio::awaitable<std::vector<std::string>> remote_client::tree(std::string saltenv) {
  auto m = co_await list(saltenv);
  std::vector<std::string> small;
  for (const auto& e : m->files) {
    if (e.size <= k_prefetch_limit) small.push_back(e.path);
  }
  auto got = co_await cache_with(saltenv, std::move(small), m);
  for (const auto& f : got) {
    if (!f.error.empty()) {
      throw base::error("file server: salt://" + f.path + "?saltenv=" + saltenv + ": " + f.error);
    }
  }
  // Files the master no longer has leave the mirror (an sls removed there
  // must not be found here).
  std::string root = dir_ + "/" + saltenv;
  std::error_code ec;
  fs::create_directories(root, ec);
  std::vector<fs::path> stale;
  for (fs::recursive_directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code fec;
    if (!it->is_regular_file(fec) && !it->is_symlink(fec)) continue;
    std::string rel = it->path().lexically_relative(root).generic_string();
    const entry* e = m->find(rel);
    if (e == nullptr || (e->size > k_prefetch_limit && !it->is_regular_file(fec))) {
      stale.push_back(it->path());
    }
  }
  for (const auto& p : stale) {
    fs::remove(p, ec);
    std::lock_guard lock(mu_);
    known_.erase(p.string());
  }
  co_return std::vector<std::string>{root};
}

}  // namespace brine::fileserver
