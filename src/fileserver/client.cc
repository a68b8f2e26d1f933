#include "fileserver/client.h"

#include <sys/stat.h>

namespace brine::fileserver {

asio::awaitable<std::vector<cached_file>> client::cache_listed(
    std::string saltenv, std::vector<std::string> paths, std::shared_ptr<const manifest>) {
  return cache(std::move(saltenv), std::move(paths));
}

asio::awaitable<std::vector<std::string>> client::tree_listed(std::string saltenv,
                                                              std::shared_ptr<const manifest>) {
  return tree(std::move(saltenv));
}

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

}  // namespace brine::fileserver
