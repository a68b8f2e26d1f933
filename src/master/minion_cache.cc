#include "master/minion_cache.h"

#include <algorithm>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <limits>
#include <tuple>

namespace brine::master {

namespace {
// How long a change may wait for the batch it is written in.
constexpr std::chrono::milliseconds k_flush_interval{500};
}  // namespace

void minion_cache::load(std::vector<store::minion_data_record> rows) {
  std::unique_lock lock(mu_);
  for (auto& r : rows) {
    auto& e = entries_[r.id];
    if (r.grains) e.grains = packed::document(*r.grains);
    if (r.pillar) e.pillar = packed::document(*r.pillar);
    e.master = std::move(r.master);
    e.last_seen = r.last_seen;
  }
}

void minion_cache::set_grains(const std::string& id, nlohmann::json grains) {
  packed::document doc(grains);
  {
    std::unique_lock lock(mu_);
    entries_[id].grains = doc;
  }
  std::lock_guard lock(dirty_mu_);
  dirty_[id].grains = std::move(doc);
}

void minion_cache::set_pillar(const std::string& id, value pillar) {
  // An expired source: the address now belongs to another object.
  auto usable = [](const shared_pack& p) { return p.doc && !p.source.expired(); };
  packed::document doc;
  {
    std::shared_lock lock(mu_);
    auto it = packs_.find(pillar.get());
    if (it != packs_.end() && usable(it->second)) doc = it->second.doc;
  }
  if (!doc) doc = packed::document(*pillar);  // packed with no lock held
  {
    std::unique_lock lock(mu_);
    auto& pack = packs_[pillar.get()];
    if (usable(pack)) {
      doc = pack.doc;  // another thread packed it meanwhile
    } else {
      pack = {pillar, doc};
    }
    entries_[id].pillar = doc;
    if (packs_.size() >= 2 * packs_pruned_at_ + 64) {
      std::erase_if(packs_, [](const auto& p) { return p.second.source.expired(); });
      packs_pruned_at_ = packs_.size();
    }
  }
  std::lock_guard lock(dirty_mu_);
  dirty_[id].pillar = std::move(doc);
}

void minion_cache::seen(const std::string& id, int64_t when, bool connected) {
  {
    std::unique_lock lock(mu_);
    auto& e = entries_[id];
    e.last_seen = when;
    auto& m = e.master;
    if (connected) {
      m = master_;
    } else if (m == master_) {
      m.clear();
    }
  }
  std::lock_guard lock(dirty_mu_);
  auto& c = dirty_[id];
  c.last_seen = when;
  c.left = !connected;
}

void minion_cache::presence(const std::string& master, const std::vector<std::string>& came,
                            const std::vector<std::string>& went, int64_t when) {
  std::unique_lock lock(mu_);
  for (const auto& id : came) {
    auto& e = entries_[id];
    e.master = master;
    e.last_seen = when;
  }
  for (const auto& id : went) {
    auto it = entries_.find(id);
    if (it != entries_.end() && it->second.master == master) {
      it->second.master.clear();
      it->second.last_seen = when;
    }
  }
}

namespace {

template <class Held>
void keep_latest(Held& held, minion_cache::run_summary run) {
  if (held && std::tie(held->started_ms, held->jid) > std::tie(run.started_ms, run.jid)) return;
  held = std::make_unique<const minion_cache::run_summary>(std::move(run));
}

}  // namespace

void minion_cache::ran(const std::vector<report::report>& reports) {
  std::unique_lock lock(mu_);
  for (const auto& r : reports) {
    keep_latest(entries_[r.minion].last_run, {r.jid, r.fun, r.started_ms, r.status, r.test});
  }
}

void minion_cache::ran(const std::string& minion, run_summary run) {
  std::unique_lock lock(mu_);
  keep_latest(entries_[minion].last_run, std::move(run));
}

void minion_cache::load_runs(store::store& db,
                             const std::function<bool(const std::string& id)>& accepted) {
  store::report_query last;
  last.last = true;
  last.brief = true;
  last.limit = std::numeric_limits<size_t>::max();
  auto runs = db.list_reports(last);
  std::erase_if(runs, [&](const report::report& r) { return !accepted(r.minion); });
  ran(runs);
}

void minion_cache::forget(const std::string& id) {
  {
    std::unique_lock lock(mu_);
    entries_.erase(id);
  }
  {
    std::lock_guard lock(dirty_mu_);
    dirty_.erase(id);
  }
  store_.post([id](store::store& db) { db.delete_minion_data(id); });
}

void minion_cache::read(const std::function<void(const lookup&)>& fn) const {
  std::shared_lock lock(mu_);
  fn([this](const std::string& id) {
    auto it = entries_.find(id);
    if (it == entries_.end()) return view{};
    return view{it->second.grains.root(), it->second.pillar.root(), it->second.master,
                it->second.last_seen, it->second.last_run.get()};
  });
}

packed::document minion_cache::packed_grains(const std::string& id) const {
  std::shared_lock lock(mu_);
  auto it = entries_.find(id);
  return it == entries_.end() ? packed::document() : it->second.grains;
}

size_t minion_cache::size() const {
  std::shared_lock lock(mu_);
  return entries_.size();
}

void minion_cache::flush() {
  std::vector<std::pair<std::string, change>> changes;
  {
    std::lock_guard lock(dirty_mu_);
    if (dirty_.empty()) return;
    changes.reserve(dirty_.size());
    for (auto& [id, c] : dirty_) changes.emplace_back(id, std::move(c));
    dirty_.clear();
  }
  store_.post([changes = std::move(changes), master = master_](store::store& db) {
    // Unpacked k_chunk minions at a time: the trees of a thousand minions'
    // grains at once would be 25 MB for a moment.
    constexpr size_t k_chunk = 64;
    std::vector<store::minion_data_update> batch;
    for (size_t i = 0; i < changes.size(); i += k_chunk) {
      batch.clear();
      for (size_t j = i; j < std::min(changes.size(), i + k_chunk); ++j) {
        const auto& [id, c] = changes[j];
        store::minion_data_update u;
        u.id = id;
        if (c.grains) u.grains = c.grains.to_json();
        if (c.pillar) u.pillar = c.pillar.to_json();
        if (c.last_seen) {
          u.last_seen = c.last_seen;
          u.master = master;
          u.left = c.left;
        }
        batch.push_back(std::move(u));
      }
      db.put_minion_data(batch);
    }
  });
}

asio::awaitable<void> minion_cache::flush_loop(const std::atomic<bool>& stopping) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (;;) {
    timer.expires_after(k_flush_interval);
    std::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    flush();
    if (ec || stopping) co_return;
  }
}

}  // namespace brine::master
