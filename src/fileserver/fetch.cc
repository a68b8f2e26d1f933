#include "fileserver/fetch.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "base/error.h"
#include "fileserver/path.h"
#include "fileserver/serve.h"

namespace brine::fileserver::detail {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::shared_ptr<const manifest> parse_manifest(const json& body, const std::string& saltenv) {
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

asio::awaitable<void> fetch_files(file_transport transport, std::string saltenv,
                                  std::vector<entry> wanted, uint64_t batch_bytes, fetch_target to,
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
      (*errors)[p.e.path] = std::string(k_changed_on_master);
      p.offset = p.e.size + 1;
      return;
    }
    std::string local = to.local(p.e.path);
    ::chmod(p.part.c_str(), (p.e.mode & 0777u) | 0600u);
    if (::rename(p.part.c_str(), local.c_str()) != 0) {
      (*errors)[p.e.path] = "cannot be written to the cache: " + local;
      ::unlink(p.part.c_str());
    } else {
      to.landed(local, p.e.hash);
      to.count(0, 1, 0);
    }
    p.offset = p.e.size + 1;
  };
  // Whatever happens, the files that were not written are closed and gone.
  struct cleanup {
    std::vector<progress>* todo;
    ~cleanup() {
      for (auto& p : *todo) {
        if (p.fd < 0) continue;
        ::close(p.fd);
        ::unlink(p.part.c_str());
      }
    }
  } closing{&todo};
  for (auto& p : todo) {
    std::string local = to.local(p.e.path);
    std::error_code ec;
    fs::create_directories(fs::path(local).parent_path(), ec);
    p.part = to.part(local);
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
      if (budget >= batch_bytes) break;
    }
    if (files.empty()) break;
    json request = {{"op", "get"},
                    {"saltenv", saltenv},
                    {"files", std::move(files)},
                    {"max_bytes", batch_bytes}};
    to.count(1, 0, 0);
    json reply = co_await transport(std::move(request));
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
        fail(*it, std::string(k_changed_on_master));
        progressed = true;
        continue;
      }
      if (!f.contains("data") || !f["data"].is_binary() ||
          f.value("offset", uint64_t{0}) != it->offset) {
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
      to.count(0, 0, data.size());
      if (it->offset == it->e.size) finish(*it);
    }
    if (!progressed) {
      for (auto& p : todo) {
        if (p.offset < p.e.size) fail(p, "the master sent none of it");
      }
    }
  }
}

}  // namespace brine::fileserver::detail
