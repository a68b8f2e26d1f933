#include "minion/master_set.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <asio/co_spawn.hpp>
#include <asio/redirect_error.hpp>
#include <asio/strand.hpp>
#include <asio/use_awaitable.hpp>

#include "base/backoff.h"
#include "base/error.h"
#include "net/connection.h"
#include "net/dns.h"

namespace brine::minion {

using namespace std::chrono_literals;

namespace {

// Failover gives a candidate this long to take the connection before moving
// on: the next master is waiting.
constexpr auto k_failover_connect_timeout = 5s;
// Between attempts to reach a master that has just dropped the connection.
constexpr auto k_grace_retry = 500ms;
// Re-resolving SRV records more often than this is no use.
constexpr auto k_min_ttl = 1s;

struct srv_targets {
  std::vector<net::srv_record> records;
  std::vector<std::vector<asio::ip::tcp::endpoint>> endpoints;  // per record; empty: unresolved
  uint32_t ttl = 0;
};

// Blocking work for the DNS thread: the records, then each target's
// addresses through the same server.
asio::awaitable<srv_targets> lookup_targets(std::string name, std::string server) {
  srv_targets out;
  auto answer = net::lookup_srv(name, server, net::k_lookup_timeout);
  out.records = std::move(answer.records);
  out.ttl = answer.ttl;
  for (const auto& r : out.records) {
    std::vector<asio::ip::tcp::endpoint> eps;
    try {
      for (const auto& a : net::lookup_host(r.target, server, net::k_lookup_timeout).addresses) {
        eps.emplace_back(a, r.port);
      }
    } catch (const std::exception& e) {
      spdlog::warn("SRV target {}:{} of {} does not resolve: {}", r.target, r.port, name, e.what());
    }
    out.endpoints.push_back(std::move(eps));
  }
  co_return out;
}

// Runs a link that reconnects until stopped; tells master_set how it ended.
asio::awaitable<void> run_link(std::shared_ptr<agent> a,
                               std::function<void(const std::shared_ptr<agent>&, bool)> ended) {
  bool kept_on = co_await a->run_persistent();
  ended(a, !kept_on);
}

}  // namespace

master_set::master_set(asio::any_io_executor executor, master_set_settings settings, deps d)
    : io_(executor),
      executor_(asio::make_strand(executor)),
      cfg_(std::move(settings)),
      deps_(std::move(d)),
      rng_(std::random_device{}()) {
  if (cfg_.use_srv_records) dns_pool_ = std::make_unique<asio::thread_pool>(1);
  if (cfg_.random_master) std::shuffle(cfg_.masters.begin(), cfg_.masters.end(), rng_);
}

master_set::~master_set() {
  if (dns_pool_) dns_pool_->join();
}

void master_set::start() {
  if (cfg_.mode == base::master_mode::failover) {
    asio::co_spawn(executor_, failover_loop(), net::logged("failover"));
  } else {
    asio::co_spawn(executor_, hot_loop(), net::logged("multi-master"));
  }
}

void master_set::stop() {
  if (stopping_.exchange(true)) return;
  std::vector<std::shared_ptr<agent>> all;
  {
    std::lock_guard lock(mu_);
    for (auto& [addr, l] : links_) all.push_back(l.a);
    if (active_) all.push_back(active_);
  }
  for (auto& a : all) a->stop();
  if (dns_pool_) dns_pool_->stop();
}

std::vector<std::pair<std::string, agent_state>> master_set::links() const {
  std::lock_guard lock(mu_);
  std::vector<std::pair<std::string, agent_state>> out;
  for (const auto& [addr, l] : links_) out.emplace_back(addr, l.a->state());
  return out;
}

size_t master_set::send_to_masters(const net::frame_ptr& frame) {
  std::vector<std::shared_ptr<agent>> members;
  {
    std::lock_guard lock(mu_);
    for (const auto& [addr, l] : links_) {
      if (l.r == role::member) members.push_back(l.a);
    }
  }
  size_t sent = 0;
  for (const auto& a : members) sent += a->send(frame) ? 1 : 0;
  return sent;
}

std::shared_ptr<agent> master_set::accepted_member() const {
  std::lock_guard lock(mu_);
  for (const auto& [addr, l] : links_) {
    if (l.r == role::member && l.a->state() == agent_state::accepted) return l.a;
  }
  return nullptr;
}

std::shared_ptr<agent> master_set::accepted_member(std::string_view feature) const {
  std::lock_guard lock(mu_);
  for (const auto& [addr, l] : links_) {
    if (l.r == role::member && l.a->supports(feature)) return l.a;
  }
  return nullptr;
}

std::vector<std::shared_ptr<agent>> master_set::accepted_members(std::string_view feature) const {
  std::vector<std::shared_ptr<agent>> out;
  std::lock_guard lock(mu_);
  for (const auto& [addr, l] : links_) {
    if (l.r == role::member && l.a->supports(feature)) out.push_back(l.a);
  }
  return out;
}

void master_set::give_up(const std::string& why) {
  spdlog::error("minion {}: {}", cfg_.link.id, why);
  if (deps_.on_give_up) deps_.on_give_up(why);
}

asio::awaitable<bool> master_set::sleep(std::chrono::steady_clock::duration d) {
  asio::steady_timer timer(executor_, d);
  std::error_code ec;
  co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  co_return !stopping_;
}

std::shared_ptr<agent> master_set::make_agent(const candidate& c, role r) {
  agent_settings s = cfg_.link;
  // A failover minion commands from one master only: its links to others
  // carry returns and nothing else.
  s.returns_only = r == role::delivery && cfg_.mode == base::master_mode::failover;
  s.master = c.address.host;
  s.master_port = c.address.port;
  s.endpoints = c.endpoints;
  s.retry_dns = cfg_.retry_dns;
  s.master_tries = cfg_.master_tries;
  agent::deps d = deps_.link;
  d.on_state = [this](agent& a, agent_state from, agent_state to) { on_state(a, from, to); };
  d.on_publish = [this](const std::string& jid) {
    jobs_received_.fetch_add(1, std::memory_order_relaxed);
    if (deps_.link.on_publish) deps_.link.on_publish(jid);
  };
  d.on_return = [this](agent& a, const spooled_return& r) { on_return(a, r); };
  d.on_acked = [this](agent& a) { release_if_delivered(a); };
  return std::make_shared<agent>(asio::make_strand(io_), std::move(s), std::move(d));
}

void master_set::release_if_delivered(agent& a) {
  std::shared_ptr<agent> done;
  {
    std::lock_guard lock(mu_);
    auto it = links_.find(a.address());
    if (it == links_.end() || it->second.a.get() != &a || it->second.r != role::delivery ||
        deps_.link.spool.owes(a.address())) {
      return;
    }
    done = it->second.a;
    links_.erase(it);
  }
  spdlog::info("minion {}: every return owed to master {} is delivered", cfg_.link.id, a.address());
  done->stop();
}

void master_set::start_persistent(const candidate& c, role r) {
  auto a = make_agent(c, r);
  {
    std::lock_guard lock(mu_);
    links_[a->address()] = {a, r};
  }
  asio::co_spawn(a->executor(),
                 run_link(a, [this](const std::shared_ptr<agent>& x,
                                    bool gave_up) { on_link_ended(x, gave_up); }),
                 net::logged("master link"));
}

void master_set::on_link_ended(const std::shared_ptr<agent>& a, bool gave_up) {
  bool members_left = false;
  bool was_member = false;
  {
    std::lock_guard lock(mu_);
    auto it = links_.find(a->address());
    if (it != links_.end() && it->second.a == a) {
      was_member = it->second.r == role::member;
      links_.erase(it);
    }
    for (const auto& [addr, l] : links_) members_left |= l.r == role::member;
  }
  update_serving();
  if (gave_up && was_member && !members_left && !stopping_ && cfg_.mode == base::master_mode::hot) {
    give_up("no master left to connect to (master_tries, retry_dns)");
  }
}

void master_set::update_serving() {
  bool now = false;
  {
    std::lock_guard lock(mu_);
    for (const auto& [addr, l] : links_) {
      if (l.r == role::member && l.a->state() == agent_state::accepted) now = true;
    }
  }
  if (serving_.exchange(now) != now && deps_.on_serving) deps_.on_serving(now);
}

void master_set::on_state(agent& a, agent_state from, agent_state to) {
  if (to == agent_state::accepted) {
    {
      std::lock_guard lock(mu_);
      if (active_.get() == &a) active_accepted_ = true;
    }
    update_serving();
    send_owed(a);
  } else if (from == agent_state::accepted) {
    update_serving();
  }
}

void master_set::send_owed(agent& a) {
  std::vector<std::string> up;  // origins whose own link is up: they send their own
  {
    std::lock_guard lock(mu_);
    for (const auto& [addr, l] : links_) {
      if (l.a.get() != &a && l.a->state() == agent_state::accepted) up.push_back(addr);
    }
  }
  // Its own returns; with `any` (or no origin known) also those whose
  // master is not connected.
  bool anyone = cfg_.strategy == base::return_strategy::any;
  auto held = deps_.link.spool.load([&](const std::string& origin) {
    return origin == a.address() ||
           ((anyone || origin.empty()) && std::find(up.begin(), up.end(), origin) == up.end());
  });
  size_t sent = 0;
  for (const auto& r : held) {
    if (a.send_return(r.bytes)) ++sent;
  }
  if (sent > 0) {
    spdlog::info("minion {}: re-sending {} unacknowledged returns to master {}", cfg_.link.id, sent,
                 a.address());
  }
  // A delivery link whose returns were acknowledged meanwhile has nothing to do.
  if (sent == 0) release_if_delivered(a);
}

void master_set::on_return(agent& a, const spooled_return& r) {
  std::shared_ptr<agent> target;
  {
    std::lock_guard lock(mu_);
    auto it = links_.find(r.origin);
    if (it != links_.end() && it->second.a->state() == agent_state::accepted) {
      target = it->second.a;
    } else if (cfg_.strategy == base::return_strategy::any) {
      for (const auto& [addr, l] : links_) {
        if (l.a->state() == agent_state::accepted) {
          target = l.a;
          break;
        }
      }
    }
  }
  if (target && target->send_return(r.bytes)) return;
  // Kept in the spool; sent when its master (or, with any, some master)
  // accepts this minion again.
  spdlog::info(
      "minion {}: job {} finished while master {} is away; its return waits in the "
      "spool",
      cfg_.link.id, r.jid, r.origin.empty() ? a.address() : r.origin);
  asio::post(executor_, [this] { ensure_delivery_links(); });
}

void master_set::ensure_delivery_links() {
  if (stopping_ || cfg_.strategy == base::return_strategy::any) return;
  for (const auto& origin : deps_.link.spool.origins()) {
    if (origin.empty()) continue;
    {
      std::lock_guard lock(mu_);
      // A master failover is about to make active delivers its own.
      if (links_.contains(origin) || (active_ && active_->address() == origin) ||
          switch_to_ == origin) {
        continue;
      }
    }
    auto address = base::parse_master_address(origin);
    if (!address) {
      spdlog::error(
          "minion {}: spooled returns name master '{}', which is not an address; "
          "they stay in the spool",
          cfg_.link.id, origin);
      continue;
    }
    spdlog::info(
        "minion {}: keeping a link to master {} until the returns it is owed are "
        "delivered (master_return_strategy origin)",
        cfg_.link.id, origin);
    start_persistent({*address, {}, 0}, role::delivery);
  }
}

asio::awaitable<std::vector<master_set::candidate>> master_set::resolve_srv(
    std::chrono::seconds& ttl) {
  std::string name = "_brine._tcp." + cfg_.srv_domain;
  std::vector<candidate> out;
  srv_targets t;
  try {
    t = co_await asio::co_spawn(dns_pool_->get_executor(), lookup_targets(name, cfg_.srv_resolver),
                                asio::use_awaitable);
  } catch (const std::exception& e) {
    spdlog::error("minion {}: {}", cfg_.link.id, e.what());
    co_return out;
  }
  ttl = std::max<std::chrono::seconds>(std::chrono::seconds(t.ttl), k_min_ttl);
  // Each record keeps its addresses through the reordering.
  std::vector<net::srv_record> records = t.records;
  for (size_t i = 0; i < records.size(); ++i) records[i].target += "\n" + std::to_string(i);
  for (auto& r : net::rfc2782_order(records, rng_)) {
    size_t cut = r.target.rfind('\n');
    size_t i = std::stoul(r.target.substr(cut + 1));
    r.target.resize(cut);
    if (t.endpoints[i].empty()) continue;
    out.push_back({{r.target, r.port}, t.endpoints[i], r.priority});
  }
  if (out.empty()) {
    spdlog::error("minion {}: none of the {} SRV targets of {} resolves to an address",
                  cfg_.link.id, t.records.size(), name);
  }
  co_return out;
}

asio::awaitable<std::vector<master_set::candidate>> master_set::candidates(
    std::chrono::seconds& ttl) {
  std::vector<candidate> out;
  if (!cfg_.use_srv_records) {
    for (const auto& m : cfg_.masters) out.push_back({m, {}, 0});
    ttl = std::chrono::seconds(0);
    co_return out;
  }
  // Without records there is nothing to connect to: look again every
  // retry_dns (resolve_srv has said why).
  while (!stopping_) {
    out = co_await resolve_srv(ttl);
    if (!out.empty() || stopping_) co_return out;
    if (cfg_.retry_dns.count() == 0) {
      give_up("no masters from the SRV records of _brine._tcp." + cfg_.srv_domain +
              " and retry_dns is 0");
      co_return out;
    }
    co_await sleep(cfg_.retry_dns);
  }
  co_return out;
}

asio::awaitable<void> master_set::hot_loop() {
  ensure_delivery_links();
  if (!cfg_.use_srv_records) {
    for (const auto& m : cfg_.masters) start_persistent({m, {}, 0}, role::member);
    co_return;
  }
  while (!stopping_) {
    std::chrono::seconds ttl{0};
    auto found = co_await candidates(ttl);
    if (found.empty()) co_return;  // stopping, or given up
    // Every target is a master to connect to; targets gone from the
    // records are let go (their owed returns keep a delivery link).
    std::vector<std::shared_ptr<agent>> gone;
    std::vector<candidate> fresh;
    {
      std::lock_guard lock(mu_);
      for (auto it = links_.begin(); it != links_.end();) {
        bool listed = std::any_of(found.begin(), found.end(), [&](const candidate& c) {
          return c.address.text() == it->first;
        });
        if (it->second.r == role::member && !listed) {
          gone.push_back(it->second.a);
          it = links_.erase(it);
        } else {
          ++it;
        }
      }
      for (const auto& c : found) {
        auto it = links_.find(c.address.text());
        if (it == links_.end() || it->second.r == role::delivery) fresh.push_back(c);
      }
    }
    for (auto& a : gone) {
      spdlog::info("minion {}: master {} is no longer in the SRV records; disconnecting",
                   cfg_.link.id, a->address());
      a->stop();
    }
    for (const auto& c : fresh) {
      std::shared_ptr<agent> delivery;
      {
        std::lock_guard lock(mu_);
        auto it = links_.find(c.address.text());
        if (it != links_.end()) {
          delivery = it->second.a;
          links_.erase(it);
        }
      }
      if (delivery) delivery->stop();
      start_persistent(c, role::member);
    }
    update_serving();
    ensure_delivery_links();
    co_await sleep(ttl);
  }
}

asio::awaitable<void> master_set::failover_loop() {
  ensure_delivery_links();
  int64_t passes = 0;
  // Between passes over a list that had no master to serve.
  auto backoff = k_recon_default;
  std::string failed;  // the master that just died: tried last
  while (!stopping_) {
    std::chrono::seconds ttl{0};
    auto order = co_await candidates(ttl);
    if (order.empty()) co_return;  // stopping, or given up
    const auto canonical_order = order;
    std::string prefer;
    {
      std::lock_guard lock(mu_);
      prefer = std::exchange(switch_to_, std::string());
    }
    auto at = [&](const std::string& addr) {
      return std::find_if(order.begin(), order.end(),
                          [&](const candidate& c) { return c.address.text() == addr; });
    };
    if (!prefer.empty() && at(prefer) != order.end()) {
      std::rotate(order.begin(), at(prefer), at(prefer) + 1);
    } else if (!failed.empty() && at(failed) != order.end()) {
      if (cfg_.use_srv_records) {
        // Records keep their priority order; the dead one goes last.
        std::rotate(at(failed), at(failed) + 1, order.end());
      } else {
        // As Salt does: on to the master after the dead one, round the list.
        std::rotate(order.begin(), at(failed) + 1, order.end());
      }
    }
    bool served = false;
    for (size_t i = 0; i < order.size() && !stopping_; ++i) {
      ended e = co_await serve_active(order[i], canonical_order, ttl);
      if (e == ended::stopped) co_return;
      if (e == ended::switched) {
        served = true;
        failed.clear();
        break;
      }
      if (e == ended::served) {
        served = true;
        failed = order[i].address.text();
        break;  // the records are looked at again before the next master
      }
    }
    if (stopping_) co_return;
    if (served) {
      passes = 0;
      backoff = k_recon_default;
      continue;
    }
    if (cfg_.master_tries > 0 && ++passes >= cfg_.master_tries) {
      give_up("no master of the list could be reached in " + std::to_string(passes) +
              " passes (master_tries)");
      co_return;
    }
    auto wait = base::equal_jitter(backoff);
    backoff = std::min(backoff * 2, k_recon_max);
    spdlog::info("minion {}: no master of the list answers; trying again in {:.1f} s", cfg_.link.id,
                 static_cast<double>(wait.count()) / 1000);
    co_await sleep(wait);
  }
}

asio::awaitable<master_set::ended> master_set::serve_active(candidate c,
                                                            std::vector<candidate> canonical,
                                                            std::chrono::seconds ttl) {
  const std::string addr = c.address.text();
  // A delivery link to this master gives way: the master keeps one
  // connection per minion, and the active link delivers its returns too.
  std::shared_ptr<agent> delivery;
  auto a = make_agent(c, role::member);
  {
    std::lock_guard lock(mu_);
    if (auto it = links_.find(addr); it != links_.end()) delivery = it->second.a;
    links_[addr] = {a, role::member};
    active_ = a;
    active_accepted_ = false;
  }
  if (delivery) delivery->stop();
  if (cfg_.master_failback || cfg_.use_srv_records) {
    // Failback looks at the list in its configured order, not in the order
    // this pass tries it.
    asio::co_spawn(executor_, watch_active(a, canonical, ttl), net::logged("failback"));
  }
  const auto alive = cfg_.link.master_alive_interval;
  auto o = co_await a->serve_once(k_failover_connect_timeout);
  ended result = ended::never_served;
  bool dead = false;
  for (;;) {
    if (o == agent::outcome::stopped || stopping_) {
      std::lock_guard lock(mu_);
      result = switch_to_.empty() ? ended::stopped : ended::switched;
      break;
    }
    if (o == agent::outcome::silent) {
      result = ended::served;
      dead = true;
      break;
    }
    if (o != agent::outcome::lost) {
      // Never served on this connection, or refused after serving.
      bool had = false;
      {
        std::lock_guard lock(mu_);
        had = active_accepted_;
      }
      result = had ? ended::served : ended::never_served;
      if (!had) {
        spdlog::info("minion {}: master {} cannot be used now; trying the next one", cfg_.link.id,
                     addr);
      }
      break;
    }
    // The connection is gone, but the master is dead only after a whole
    // master_alive_interval of silence: a restarting master keeps its
    // minions.
    auto deadline = a->last_contact() + alive;
    o = agent::outcome::connect_failed;
    while (!stopping_ && std::chrono::steady_clock::now() < deadline) {
      auto left = deadline - std::chrono::steady_clock::now();
      if (!co_await sleep(
              std::min<std::chrono::steady_clock::duration>(base::equal_jitter(k_grace_retry), left))) {
        break;
      }
      left = deadline - std::chrono::steady_clock::now();
      if (left <= std::chrono::steady_clock::duration::zero()) break;
      o = co_await a->serve_once(
          std::clamp<std::chrono::steady_clock::duration>(left, 1s, k_failover_connect_timeout));
      if (o != agent::outcome::connect_failed && o != agent::outcome::unresolved) break;
    }
    if (o == agent::outcome::lost || o == agent::outcome::silent || o == agent::outcome::stopped) {
      continue;  // it came back (and went again), or we were stopped
    }
    result = ended::served;
    dead = true;
    break;
  }
  if (dead) {
    spdlog::warn(
        "minion {}: master {} is dead: no contact for {} s (master_alive_interval); "
        "failing over",
        cfg_.link.id, addr, alive.count());
  }
  {
    std::lock_guard lock(mu_);
    if (active_ == a) active_.reset();
    if (auto it = links_.find(addr); it != links_.end() && it->second.a == a) links_.erase(it);
  }
  a->stop();
  update_serving();
  // Returns of jobs from this master that are still running go to it by a
  // delivery link.
  ensure_delivery_links();
  co_return result;
}

asio::awaitable<void> master_set::watch_active(std::shared_ptr<agent> active,
                                               std::vector<candidate> order,
                                               std::chrono::seconds ttl) {
  using clock = std::chrono::steady_clock;
  const auto never = clock::time_point::max();
  auto failback_every = cfg_.master_failback_interval.count() > 0 ? cfg_.master_failback_interval
                                                                  : cfg_.link.master_alive_interval;
  auto next_failback = cfg_.master_failback ? clock::now() + failback_every : never;
  auto next_records = cfg_.use_srv_records && ttl.count() > 0 ? clock::now() + ttl : never;
  auto is_active = [&] {
    std::lock_guard lock(mu_);
    return active_ == active;
  };
  while (!stopping_ && is_active()) {
    auto wake = std::min(next_failback, next_records);
    if (wake == never) co_return;
    if (!co_await sleep(std::max(wake - clock::now(), clock::duration::zero()))) co_return;
    if (!is_active()) co_return;
    std::string target;
    if (clock::now() >= next_records) {
      std::chrono::seconds fresh_ttl{0};
      auto fresh = co_await resolve_srv(fresh_ttl);
      next_records = clock::now() + std::max(fresh_ttl, std::chrono::seconds(k_min_ttl));
      if (!fresh.empty()) {
        bool listed = std::any_of(fresh.begin(), fresh.end(), [&](const candidate& c) {
          return c.address.text() == active->address();
        });
        if (!listed) {
          spdlog::info("minion {}: master {} is no longer in the SRV records; moving to {}",
                       cfg_.link.id, active->address(), fresh.front().address.text());
          target = fresh.front().address.text();
        }
        order = std::move(fresh);
      }
    }
    if (target.empty() && clock::now() >= next_failback) {
      next_failback = clock::now() + failback_every;
      // The masters before the active one in the configured order (with
      // SRV records: those of a better priority level).
      auto me = std::find_if(order.begin(), order.end(), [&](const candidate& c) {
        return c.address.text() == active->address();
      });
      for (auto it = order.begin(); it != me && active->state() == agent_state::accepted; ++it) {
        if (me != order.end() && cfg_.use_srv_records && it->priority >= me->priority) break;
        auto probe = make_agent(*it, role::member);
        if (co_await probe->probe(k_failover_connect_timeout)) {
          spdlog::info("minion {}: master {} answers again; failing back to it from {}",
                       cfg_.link.id, it->address.text(), active->address());
          target = it->address.text();
          break;
        }
      }
    }
    if (!target.empty() && is_active()) {
      {
        std::lock_guard lock(mu_);
        switch_to_ = target;
      }
      active->stop();
      co_return;
    }
  }
}

}  // namespace brine::minion
