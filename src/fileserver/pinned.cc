#include "fileserver/pinned.h"

#include <utility>

namespace brine::fileserver {

asio::awaitable<std::vector<std::string>> pinned_client::envs() {
  {
    std::lock_guard lock(mu_);
    if (envs_) co_return *envs_;
  }
  std::vector<std::string> got = co_await inner_.envs();
  std::lock_guard lock(mu_);
  if (!envs_) envs_ = std::move(got);
  co_return *envs_;
}

asio::awaitable<std::shared_ptr<const manifest>> pinned_client::list(std::string saltenv) {
  {
    std::lock_guard lock(mu_);
    if (auto it = listed_.find(saltenv); it != listed_.end()) co_return it->second;
  }
  std::shared_ptr<const manifest> got = co_await inner_.list(saltenv);
  std::lock_guard lock(mu_);
  // Two states that asked at once: the first answer is the run's.
  auto [it, fresh] = listed_.emplace(std::move(saltenv), std::move(got));
  co_return it->second;
}

void pinned_client::seed(const std::string& saltenv, std::vector<entry> files) {
  std::map<std::string, entry> by_path;
  for (auto& e : files) by_path.emplace(e.path, std::move(e));
  auto m = make_manifest(saltenv, std::move(by_path), {});
  std::lock_guard lock(mu_);
  seeded_[saltenv] = std::move(m);
}

asio::awaitable<std::vector<cached_file>> pinned_client::cache(std::string saltenv,
                                                               std::vector<std::string> paths) {
  std::shared_ptr<const manifest> m;
  {
    std::lock_guard lock(mu_);
    if (auto it = listed_.find(saltenv); it != listed_.end()) {
      m = it->second;
    } else if (auto s = seeded_.find(saltenv); s != seeded_.end()) {
      bool all = true;
      for (const auto& p : paths) all = all && s->second->find(p) != nullptr;
      if (all) m = s->second;
    }
  }
  if (!m) m = co_await list(saltenv);
  std::vector<cached_file> got =
      co_await inner_.cache_listed(std::move(saltenv), std::move(paths), std::move(m));
  co_return got;
}

asio::awaitable<std::vector<std::string>> pinned_client::tree(std::string saltenv) {
  std::shared_ptr<const manifest> m = co_await list(saltenv);
  std::vector<std::string> got = co_await inner_.tree_listed(std::move(saltenv), std::move(m));
  co_return got;
}

}  // namespace brine::fileserver
