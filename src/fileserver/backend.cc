#include "fileserver/backend.h"

#include <algorithm>

#include "fileserver/roots.h"

namespace brine::fileserver {

const entry* manifest::find(const std::string& path) const {
  auto it = std::lower_bound(files.begin(), files.end(), path,
                             [](const entry& e, const std::string& p) { return e.path < p; });
  return it != files.end() && it->path == path ? &*it : nullptr;
}

std::shared_ptr<const manifest> make_manifest(std::string saltenv,
                                              std::map<std::string, entry> files,
                                              std::set<std::string> dirs) {
  auto m = std::make_shared<manifest>();
  m->saltenv = std::move(saltenv);
  std::string lines;
  m->files.reserve(files.size());
  for (auto& [rel, e] : files) {
    for (size_t at = rel.find('/'); at != std::string::npos; at = rel.find('/', at + 1)) {
      dirs.insert(rel.substr(0, at));
    }
    lines += e.path + '\0' + e.hash + '\0' + std::to_string(e.mode) + '\n';
    m->files.push_back(std::move(e));
  }
  for (const auto& d : dirs) lines += d + '\0' + "dir" + '\n';
  m->dirs.assign(dirs.begin(), dirs.end());
  m->revision = hash_bytes(lines);
  return m;
}

std::vector<std::string> layered::envs() {
  std::set<std::string> all;
  for (auto* b : order_) {
    for (auto& e : b->envs()) all.insert(std::move(e));
  }
  return {all.begin(), all.end()};
}

std::shared_ptr<const manifest> layered::list(const std::string& saltenv) {
  if (order_.size() == 1) return order_.front()->list(saltenv);
  std::map<std::string, entry> files;
  std::set<std::string> dirs;
  for (auto* b : order_) {
    auto m = b->list(saltenv);
    for (const auto& e : m->files) files.emplace(e.path, e);  // an earlier backend wins
    dirs.insert(m->dirs.begin(), m->dirs.end());
  }
  return make_manifest(saltenv, std::move(files), std::move(dirs));
}

file_chunk layered::read(const std::string& saltenv, const std::string& path, uint64_t offset,
                         uint64_t max_bytes) {
  if (order_.size() == 1) return order_.front()->read(saltenv, path, offset, max_bytes);
  for (auto* b : order_) {
    if (b->list(saltenv)->find(path) != nullptr) return b->read(saltenv, path, offset, max_bytes);
  }
  file_chunk out;
  out.error = "no such file in saltenv " + saltenv;
  return out;
}

}  // namespace brine::fileserver
