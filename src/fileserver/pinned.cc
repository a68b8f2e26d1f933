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
  for (int attempt = 0;; ++attempt) {
    std::shared_ptr<const manifest> m;
    bool listed = false;  // a listing of the master's, not a compile master's hashes
    {
      std::lock_guard lock(mu_);
      if (auto it = listed_.find(saltenv); it != listed_.end()) {
        m = it->second;
        listed = true;
      } else if (auto s = seeded_.find(saltenv); s != seeded_.end()) {
        bool all = true;
        for (const auto& p : paths) all = all && s->second->find(p) != nullptr;
        if (all) m = s->second;
      }
    }
    if (!m) {
      m = co_await list(saltenv);
      listed = true;
    }
    std::vector<cached_file> got = co_await inner_.cache_listed(saltenv, paths, m);
    bool moved = false;
    bool handed = false;
    for (const auto& f : got) {
      moved = moved || f.error == k_changed_on_master;
      handed = handed || !f.local.empty();
    }
    if (moved && !handed && listed && attempt == 0 && forget_listing(saltenv, m)) continue;
    if (handed) hand_out(saltenv);
    co_return got;
  }
}

asio::awaitable<std::vector<std::string>> pinned_client::tree(std::string saltenv) {
  for (int attempt = 0;; ++attempt) {
    std::shared_ptr<const manifest> m = co_await list(saltenv);
    try {
      std::vector<std::string> got = co_await inner_.tree_listed(saltenv, m);
      hand_out(saltenv);
      co_return got;
    } catch (const listing_moved&) {
      if (attempt > 0 || !forget_listing(saltenv, m)) throw;
    }
  }
}

void pinned_client::hand_out(const std::string& saltenv) {
  std::lock_guard lock(mu_);
  handed_.insert(saltenv);
}

bool pinned_client::forget_listing(const std::string& saltenv,
                                   const std::shared_ptr<const manifest>& m) {
  std::lock_guard lock(mu_);
  if (handed_.contains(saltenv)) return false;
  auto it = listed_.find(saltenv);
  if (it != listed_.end() && it->second == m) listed_.erase(it);
  return true;
}

}  // namespace brine::fileserver
