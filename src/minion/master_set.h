#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/steady_timer.hpp>
#include <asio/thread_pool.hpp>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "base/config.h"
#include "minion/agent.h"
#include "minion/jid_history.h"
#include "minion/spool.h"
#include "net/dns.h"

namespace brine::minion {

struct master_set_settings {
  agent_settings link;  // for every link; master, port and endpoints are set per master
  std::vector<base::master_address> masters;  // the static list (not with SRV)
  base::master_mode mode = base::master_mode::hot;
  bool random_master = false;
  bool master_failback = false;
  std::chrono::seconds master_failback_interval{0};  // 0: master_alive_interval
  int64_t master_tries = -1;
  std::chrono::seconds retry_dns{30};
  base::return_strategy strategy = base::return_strategy::origin;
  bool use_srv_records = false;
  std::string srv_domain;
  std::string srv_resolver;  // HOST:PORT; empty: the system's resolver
};

// A minion's masters. Hot (master_type str): one link per master, each
// connected and reconnecting on its own, so that a dead master never delays
// the others. Failover: one master at a time in list order; a master is dead
// when nothing has come from it for master_alive_interval (after a lost
// connection the minion tries it again meanwhile, so a restarted master keeps
// its minions), and the minion then moves on to the next; with
// master_failback it returns to an earlier master once that answers. With
// use_srv_records the list is the SRV record set of srv_domain, in RFC 2782
// order, looked up again when the chosen master fails and when the records'
// TTL runs out.
//
// Returns: every return is spooled with its origin (the master that sent the
// job). With master_return_strategy origin it goes to that master only: when
// the origin is not a link right now (failover moved on, the list changed),
// a delivery link to it is kept until the spool owes it nothing. With any,
// it goes to the origin if connected, else to the first connected master.
//
// Lifecycle: construct, start(), stop(); the owner keeps it alive until the
// io_context has stopped. Threading: its loops on its own strand; links on
// strands of their own; links() and serving() from any thread.
class master_set {
 public:
  struct deps {
    // What every link shares. master_set sets the links' on_state, on_return
    // and on_acked; on_publish (may be empty) hears every link's publishes.
    agent::deps link;
    // Serving (some master accepts this minion and can command it) or not.
    std::function<void(bool serving)> on_serving;  // may be empty
    // The minion cannot go on (master_tries used up, a name that does not
    // resolve with retry_dns 0); the daemon exits.
    std::function<void(const std::string& why)> on_give_up;  // may be empty
  };

  master_set(asio::any_io_executor executor, master_set_settings settings, deps d);
  ~master_set();
  master_set(const master_set&) = delete;
  master_set& operator=(const master_set&) = delete;

  void start();
  void stop();

  bool serving() const { return serving_.load(); }
  // Each link's master ("host:port") and state.
  std::vector<std::pair<std::string, agent_state>> links() const;
  // Sends `frame` to every master this minion is a member of (not to links
  // kept only to deliver returns); how many took it.
  size_t send_to_masters(const net::frame_ptr& frame);
  // A member link whose master accepts this minion now (the first in the
  // set's order), or null: where salt:// requests go.
  std::shared_ptr<agent> accepted_member() const;
  // The first such link whose master takes `feature` (auth_reply), or null.
  std::shared_ptr<agent> accepted_member(std::string_view feature) const;
  // Every member link whose master accepts this minion and lists `feature`,
  // in address order.
  std::vector<std::shared_ptr<agent>> accepted_members(std::string_view feature) const;
  uint64_t jobs_received() const { return jobs_received_.load(std::memory_order_relaxed); }

 private:
  enum class role { member, delivery };
  struct link {
    std::shared_ptr<agent> a;
    role r = role::member;
  };
  // A master to try, with its SRV data when it came from a record.
  struct candidate {
    base::master_address address;
    std::vector<asio::ip::tcp::endpoint> endpoints;  // resolved SRV target; empty: resolve
    uint16_t priority = 0;
  };
  enum class ended { served, never_served, switched, stopped };

  std::shared_ptr<agent> make_agent(const candidate& c, role r);
  // Starts a link that reconnects until stopped (hot members, delivery links).
  void start_persistent(const candidate& c, role r);
  void on_link_ended(const std::shared_ptr<agent>& a, bool gave_up);
  void on_state(agent& a, agent_state from, agent_state to);
  void on_return(agent& a, const spooled_return& r);
  // Sends what the spool holds for `a`, which has just been accepted.
  void send_owed(agent& a);
  // Lets a delivery link go once the spool owes its master nothing.
  void release_if_delivered(agent& a);
  // Keeps a delivery link for every origin the spool owes that has no link.
  void ensure_delivery_links();
  void update_serving();

  asio::awaitable<void> hot_loop();
  asio::awaitable<void> failover_loop();
  // Serves from `c` until it is dead, refused, or switched away from.
  // `canonical`: the list in its configured (or RFC 2782) order.
  asio::awaitable<ended> serve_active(candidate c, std::vector<candidate> canonical,
                                      std::chrono::seconds ttl);
  // While `active` serves: failback probes of the masters before it, and
  // (SRV) a new look at the records when their TTL runs out. Asks for a
  // switch through switch_to_.
  asio::awaitable<void> watch_active(std::shared_ptr<agent> active, std::vector<candidate> order,
                                     std::chrono::seconds ttl);
  void give_up(const std::string& why);
  // The current candidates in the order to try them, `ttl` the records'
  // TTL. Without SRV records it looks again every retry_dns; empty only when
  // stopping or giving up.
  asio::awaitable<std::vector<candidate>> candidates(std::chrono::seconds& ttl);
  asio::awaitable<std::vector<candidate>> resolve_srv(std::chrono::seconds& ttl);
  asio::awaitable<bool> sleep(std::chrono::steady_clock::duration d);

  asio::any_io_executor io_;        // links get strands of their own on it
  asio::any_io_executor executor_;  // a strand: the loops
  master_set_settings cfg_;
  deps deps_;
  std::mt19937_64 rng_;
  std::unique_ptr<asio::thread_pool> dns_pool_;  // SRV lookups block: a thread of their own

  mutable std::mutex mu_;
  std::map<std::string, link> links_;  // by "host:port"
  std::shared_ptr<agent> active_;      // failover: the current master's link
  bool active_accepted_ = false;       // failover: the active link reached accepted
  std::string switch_to_;              // failover: move to this master (failback, new records)
  std::atomic<bool> serving_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> jobs_received_{0};
};

}  // namespace brine::minion
