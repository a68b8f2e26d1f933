#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/steady_timer.hpp>
#include <asio/thread_pool.hpp>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "minion/figures.h"
#include "minion/jid_history.h"
#include "minion/job_table.h"
#include "minion/spool.h"
#include "modules/context.h"
#include "modules/registry.h"
#include "net/connection.h"
#include "net/tls.h"

namespace brine::minion {

// What one master connection needs to know (a subset of minion_config, so
// that simulated minions can be made without a file each).
struct agent_settings {
  std::string id;
  std::string master;  // host name or IP literal
  uint16_t master_port = 4506;
  // Addresses to connect to instead of resolving `master` (SRV targets,
  // resolved through the configured DNS server); empty: resolve `master`.
  std::vector<asio::ip::tcp::endpoint> endpoints;
  std::string source;  // config file, for messages
  std::chrono::seconds acceptance_wait_time{10};
  std::chrono::seconds acceptance_wait_time_max{0};
  std::chrono::seconds master_alive_interval{30};
  std::chrono::seconds job_timeout{3600};
  std::chrono::seconds retry_dns{30};  // run_persistent: wait before resolving again; 0: give up
  int64_t master_tries = -1;           // run_persistent: failed attempts in a row; -1: forever
  size_t max_frame_bytes = 16 * 1024 * 1024;
  uint64_t spool_max_bytes = 256ull * 1024 * 1024;
  std::string source_address;  // bind to this local address first (swarm); empty: any
  // Only to deliver returns owed to this master (a failover minion that has
  // moved on): the master sends it no jobs and counts it as not connected.
  bool returns_only = false;
};

enum class agent_state { connecting, pending, accepted, refused };

// How one master answered a brine call's pillar request, or why it did not.
// `detail` is for messages and never holds pillar values.
struct call_reply {
  enum class status {
    answered,      // `pillar` holds the pillar the master compiled
    not_accepted,  // the master has this minion's key pending, rejected or denied
    unreachable,   // no connection, no TLS handshake, the name does not resolve
    untrusted,     // the master's key is not the pinned one
    failed,        // the connection closed or the master reported an error
    timed_out,     // no answer before the deadline
    cancelled,     // another master answered first
  };
  status st = status::failed;
  std::string detail;
  nlohmann::ordered_json pillar;  // in the order the master compiled it
  nlohmann::json tops = nlohmann::json::object();  // its master_tops for this minion
};

// Salt's recon_default and recon_max: reconnect waits start at 1 s and
// double up to 10 s.
inline constexpr std::chrono::milliseconds k_recon_default{1000};
inline constexpr std::chrono::milliseconds k_recon_max{10000};
// How long a salt:// file request may wait for the master's answer.
inline constexpr std::chrono::seconds k_file_request_limit{120};

// Decides whether the master's key is to be trusted (master_finger, or trust
// on first use); `where` is "host:port" for messages.
using master_trust = std::function<bool(EVP_PKEY* key, const std::string& where)>;

// One minion's link to one master: connect, pin, authenticate, serve jobs.
// serve_once() is one connection's life; run_persistent() reconnects with
// jittered exponential backoff (slowly when refused) until stopped. Which
// master to talk to, and when to move on, is master_set's business.
//
// Jobs are shared by all links of a minion: a jid runs once (jid_history),
// its return goes to the spool with this link's master as its origin, and
// deps.on_return decides which link sends it.
//
// Lifecycle: made with make_shared; run serve_once()/run_persistent() on
// the agent's executor (a strand), stop() to end it. Its jobs and connection
// handlers hold it (strongly, weakly), so it may be dropped while a job
// runs; what it references (deps) must outlive the io_context's run.
// Threading: the loop and the connection on the agent's strand; instant jobs
// (test.ping…) there too, every other job on a strand of its own; state
// guarded by mu_.
class agent : public std::enable_shared_from_this<agent> {
 public:
  struct deps {
    const net::tls_context& tls;
    const net::tls_identity* identity;  // null: the context's own
    const modules::registry& functions;
    return_spool& spool;
    jid_history& history;
    asio::thread_pool* blocking;  // for a blocking spool; may be null
    master_trust trust;
    std::function<void(agent& a, agent_state from, agent_state to)> on_state;  // may be empty
    std::function<void(const std::string& jid)> on_publish;  // may be empty (swarm metrics)
    // A job received on this link has finished and its return is spooled.
    std::function<void(agent& a, const spooled_return& r)> on_return;  // may be empty
    // The master acknowledged a return (the spool has forgotten it).
    std::function<void(agent& a)> on_acked;  // may be empty
    // The grains message, sent to each master right after it accepts this
    // minion (the minion's grains change only on a refresh).
    std::function<net::frame_ptr()> grains;  // may be empty
    // Whether a publish targets this minion (Salt's minion-side check of a
    // greedy publish: the master sends a grain target to minions it has no
    // grains of); empty: every publish does.
    std::function<bool(const nlohmann::json& publish)> targeted;  // may be empty
    // The pillar a master compiled for this minion arrived.
    // The pillar and the master_tops ({saltenv: [sls]}, {} for none) a
    // master sent.
    std::function<void(nlohmann::ordered_json pillar, nlohmann::json tops)> on_pillar;  // may be empty
    // What jobs see of the minion (modules::call::context); may be null.
    modules::minion_context* context = nullptr;
    // Jobs register here while they run (saltutil.running, kill_job).
    job_table* jobs = nullptr;
    // The schedule message, sent after the grains to a master that takes
    // scheduled runs (auth_reply's features); empty or null: none.
    std::function<net::frame_ptr()> schedule;  // may be empty
    // A master told the periods this minion's scheduled jobs run at.
    std::function<void(const nlohmann::json& body)> on_schedule_periods;  // may be empty
    // The daemon's figures (status.metrics); null in brine swarm.
    minion::figures* figures = nullptr;
  };

  enum class outcome {
    lost,              // was accepted; the connection closed or failed
    silent,            // was accepted; nothing came for master_alive_interval
    pending_closed,    // the key was pending; the connection closed
    connect_failed,    // no connection, handshake or authentication
    unresolved,        // the master's name did not resolve
    refused,           // the master rejected or denied this minion's key
    untrusted_master,  // the master's key is not the pinned one
    stopped,
  };

  agent(asio::any_io_executor executor, agent_settings settings, deps d);

  // One connection, from connect to its end. A pending minion stays
  // connected, asking again every acceptance_wait_time.
  asio::awaitable<outcome> serve_once(std::chrono::steady_clock::duration connect_timeout);
  // serve_once() again and again: at once after a lost connection, with
  // jittered backoff (1 s doubling to 10 s) after failed ones, slowly when
  // refused. Returns false when it gives up: master_tries failed attempts in
  // a row, or a name that does not resolve with retry_dns 0.
  asio::awaitable<bool> run_persistent();
  // Whether the master takes connections: a TCP connect within `timeout`,
  // closed at once (failback's probe; the master logs no warning for it).
  asio::awaitable<bool> probe(std::chrono::steady_clock::duration timeout);
  // brine call: one connection, the daemon's connect, handshake and pinning,
  // that authenticates with purpose `call` (the master keeps the minion's own
  // session as it is and sends no jobs on it), sends `grains` with a
  // pillar_request and waits for the pillar, all before `deadline`. Logs
  // nothing (a master's key that is not the pinned one aside): the caller
  // reports. Ends early, as cancelled, on stop() or on cancellation. With
  // `keep_open`, an answered call keeps its connection for request() (the
  // call's salt:// files) until stop().
  asio::awaitable<call_reply> fetch_pillar(nlohmann::json grains,
                                           std::chrono::steady_clock::time_point deadline,
                                           bool keep_open = false);
  void stop();
  bool stopping() const { return stopping_.load(); }

  agent_state state() const;
  // When this link last received anything (the time of a new connection
  // counts): failover measures a master's silence from it.
  std::chrono::steady_clock::time_point last_contact() const;
  // "host:port": how the spool names this master.
  const std::string& address() const { return address_; }
  const asio::any_io_executor& executor() const { return executor_; }
  // Sends a spooled return now if the master has accepted this minion.
  bool send_return(const encoded_return& bytes);
  // Sends `frame` if the master has accepted this minion on a live link.
  bool send(const net::frame_ptr& frame);
  // Sends a request (file_request) on the live, accepted link and awaits
  // the master's answer with the same id: nullopt when there is no such
  // link, the connection closes first, or `limit` passes. Safe from any
  // executor.
  asio::awaitable<std::optional<proto::message>> request(proto::msg_type type,
                                                         nlohmann::json body,
                                                         std::chrono::steady_clock::duration limit);
  // request(file_request) with `request`, as the body of the master's
  // file_reply; throws base::error naming the master when the link is not
  // accepted or no answer comes within `limit`.
  static asio::awaitable<nlohmann::json> file_request(std::shared_ptr<agent> link,
                                                      nlohmann::json request,
                                                      std::chrono::steady_clock::duration limit);
  // Whether the master listed `feature` in its auth_reply (false until it
  // accepts this minion on the current connection).
  bool supports(std::string_view feature) const;
  // Runs a scheduled job the master granted (`m`: a publish body with the
  // jid it recorded) as a published one runs: once (jid history), listed
  // and killable while it runs, its return spooled and sent to this link's
  // master. Returns when the return is handed on.
  static asio::awaitable<void> run_scheduled(std::shared_ptr<agent> self, proto::message m);
  // Jobs received since start (repeat publishes of a running job included).
  uint64_t jobs_received() const { return jobs_received_.load(std::memory_order_relaxed); }

 private:
  // The first steps of every connection: connect, TLS handshake with the
  // minion's key, the master's key checked against the pinned one. On
  // failure `stream` is null and `failed` says why (`error`: the detail).
  struct opened {
    outcome failed = outcome::connect_failed;
    std::string error;
    std::unique_ptr<net::tls_stream> stream;
  };
  asio::awaitable<opened> open(std::chrono::steady_clock::duration connect_timeout,
                               std::chrono::steady_clock::duration handshake_timeout, bool say);
  asio::awaitable<std::optional<asio::ip::tcp::endpoint>> connect(
      asio::ip::tcp::socket& socket, std::chrono::steady_clock::duration timeout, outcome& why,
      bool say, std::string* error = nullptr);
  void on_message(proto::message&& m);
  void on_publish(const std::shared_ptr<net::connection>& conn, proto::message&& m);
  static asio::awaitable<void> run_job(std::shared_ptr<agent> self, proto::message m);
  void set_state(agent_state s);

  asio::any_io_executor executor_;
  agent_settings cfg_;
  deps deps_;
  std::string address_;

  mutable std::mutex mu_;
  std::shared_ptr<net::connection> conn_;
  agent_state state_ = agent_state::connecting;  // as others see it
  // The current connection's authentication, reset on each connect.
  enum class auth_state { waiting, pending, accepted, refused } auth_ = auth_state::waiting;
  std::chrono::steady_clock::time_point last_rx_;
  bool said_pending_ = false;
  std::vector<std::string> features_;  // the current connection's master's
  uint64_t failures_ = 0;  // connects failed in a row (the agent's strand only)
  bool said_spool_full_ = false;
  std::shared_ptr<asio::steady_timer> wake_;
  // Requests awaiting their answer, by id (ids from k_first_request_id up,
  // clear of the fixed ids of auth and call messages).
  struct pending_reply;
  std::unordered_map<uint64_t, std::shared_ptr<pending_reply>> pending_;
  uint64_t next_request_ = 0;
  // Ends every pending request (the connection is gone).
  void fail_pending();
  // Hands a request's answer to whoever awaits it; drops one nobody does.
  void deliver_reply(proto::message&& m);
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> jobs_received_{0};
};

}  // namespace brine::minion
