#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <map>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

namespace brine::base {

// One entry of the minion's `master` option: a host name or IP literal (IPv6
// without brackets) and the port (`host:port` in the file, else master_port).
struct master_address {
  std::string host;
  uint16_t port = 4506;
  // "host:port", with brackets around an IPv6 literal: how messages and the
  // spool name a master.
  std::string text() const;
  bool operator==(const master_address&) const = default;
};

// "host", "host:port", an IP literal, or "[IPv6]:port", as the `master`
// option takes them (the inverse of master_address::text()); nullopt when the
// text is none of these. Without a port, `default_port`.
std::optional<master_address> parse_master_address(const std::string& text,
                                                   uint16_t default_port = 4506);

// One entry of Salt's `gitfs_remotes`: a URL or local path (a relative one
// resolved against the config's directory), with the per-remote options
// Salt allows (unset: gitfs_root, gitfs_mountpoint, gitfs_base, ...).
struct gitfs_remote_config {
  std::string url;
  std::optional<std::string> root;
  std::optional<std::string> mountpoint;
  std::optional<std::string> base;
  // Credentials for a private remote (pubkey and privkey resolved as paths).
  std::optional<std::string> user;
  std::optional<std::string> password;
  std::optional<bool> insecure_auth;
  std::optional<std::string> pubkey;
  std::optional<std::string> privkey;
  std::optional<std::string> passphrase;
};

// One job of the minion's `schedule` (Salt's names): `function` with `args`
// and `kwargs` every `seconds` (Salt's seconds, minutes, hours and days
// added up), each run a random [splay_start, splay_end] seconds after its
// slot; `maxrunning` runs of it at once at most (a run due while that many
// run is skipped); `run_on_start`: once right after the minion starts too.
struct schedule_job {
  std::string name;
  std::string function;
  nlohmann::json args = nlohmann::json::array();
  nlohmann::json kwargs = nlohmann::json::object();
  uint64_t seconds = 0;
  uint32_t splay_start = 0;
  uint32_t splay_end = 0;
  bool run_on_start = false;
  uint32_t maxrunning = 1;
  bool enabled = true;
  int line = 0;  // of the job's name in the config file, for messages
};

// Relative paths in a config file are resolved against the directory of that
// file, so that a whole installation can live in one folder.
struct master_config {
  std::string source;                   // the file this came from
  std::string interface = "0.0.0.0";   // address to listen on for minions
  uint16_t port = 4506;                 // minion port (publish and requests multiplexed)
  std::string pki_dir = "/etc/brine/pki/master";
  std::string cachedir = "/var/cache/brine/master";
  std::string sock_dir = "/var/run/brine/master";
  bool auto_accept = false;
  std::string autosign_file;            // empty: none
  std::string autoreject_file;          // empty: none
  uint64_t max_frame_bytes = 16 * 1024 * 1024;
  std::string log_file;                 // empty: stderr
  spdlog::level::level_enum log_level = spdlog::level::info;
  uint32_t keep_jobs = 24;              // hours
  // Hours a state-run report is kept (each minion's latest is kept longer:
  // until a newer one replaces it). PuppetDB's report-ttl is 14 days.
  uint32_t keep_reports = 336;
  uint32_t worker_threads = 0;          // 0: one per core, at most 4
  uint32_t max_concurrent_handshakes = 256;
  uint32_t handshake_timeout = 10;      // seconds
  // The Prometheus endpoint (http://metrics_interface:metrics_port/metrics);
  // 0: off. Loopback by default: the figures name minions and masters.
  uint16_t metrics_port = 0;
  std::string metrics_interface = "127.0.0.1";
  // Dead-minion detection (Salt's minion option names): after idle seconds of
  // silence, a probe every intvl seconds, dead after cnt unanswered probes.
  bool tcp_keepalive = true;
  uint32_t tcp_keepalive_idle = 60;
  uint32_t tcp_keepalive_cnt = 3;
  uint32_t tcp_keepalive_intvl = 20;
  // Seconds a publish for a minion that is not connected waits for it when
  // the client gave no delivery deadline (brine cmd --async).
  uint32_t publish_hold = 60;
  // Salt's `nodegroups`: name -> compound expression or list of words, as
  // read (the master checks them with the target module at start).
  nlohmann::json nodegroups = nlohmann::json::object();
  // The salt:// file server (Salt's names): saltenv -> directories, and
  // seconds a saltenv's file list (with its hashes) is answered without
  // looking at the tree again; 0: look every time (concurrent requests share
  // one look).
  std::map<std::string, std::vector<std::string>> file_roots{{"base", {"/srv/salt"}}};
  uint32_t fileserver_list_cache_time = 0;
  // Salt's fileserver_backend: roots and/or gitfs, in order of precedence;
  // and its gitfs options. The commits gitfs serves are pinned in the store.
  std::vector<std::string> fileserver_backend{"roots"};
  std::vector<gitfs_remote_config> gitfs_remotes;
  std::string gitfs_base = "master";
  std::string gitfs_root;
  std::string gitfs_mountpoint;
  // Salt's gitfs credentials, the defaults of every remote's own (empty:
  // unset). The password and passphrase are never logged or shown.
  std::string gitfs_user;
  std::string gitfs_password;
  bool gitfs_insecure_auth = false;
  std::string gitfs_pubkey;
  std::string gitfs_privkey;
  std::string gitfs_passphrase;
  // Salt's pillar options.
  std::map<std::string, std::vector<std::string>> pillar_roots{{"base", {"/srv/pillar"}}};
  std::string pillar_source_merging_strategy = "smart";
  bool pillar_merge_lists = false;
  std::string pillarenv;                // empty: every environment
  // Salt's ext_pillar (a list of one-key mappings, checked by the pillar
  // compiler's host against the interfaces it has) and ext_pillar_first.
  nlohmann::json ext_pillar = nlohmann::json::array();
  bool ext_pillar_first = false;
  // Salt's master_tops: tops module -> its configuration (checked by the
  // pillar service, which runs them).
  nlohmann::json master_tops = nlohmann::json::object();
  // Options of the form `module.option`, and `postgres:` (the postgres
  // ext_pillar's connection), kept as Salt keeps every option in opts.
  nlohmann::json module_options = nlohmann::json::object();
  // Salt's gpg renderer: where gpg finds the secret keys (empty: gpgkeys
  // beside the config file, as Salt's CONFIG_DIR/gpgkeys) and whether a
  // block it cannot decrypt fails the file (Salt's default: kept as is).
  std::string gpg_keydir;
  bool gpg_decrypt_must_succeed = false;
  // Salt's `publisher_acl`: local user (or glob) -> allowed function globs,
  // or {target glob: [function globs]}; as read, checked by the master.
  nlohmann::json publisher_acl = nlohmann::json::object();
  // The pillar keys `brine inventory` may print when asked for them by
  // name (`--fields pillar.KEY`): globs over dotted paths. Empty: none.
  std::vector<std::string> inventory_pillar_keys;
  // Where keys, jobs, returns and minion data live: "sqlite" (cachedir/
  // jobs.db) or "postgresql://USER@HOST:PORT/DB?sslmode=..." shared by the
  // masters of a site, its password in store_password_file (mode 0600).
  std::string store = "sqlite";
  std::string store_password_file;
  // PostgreSQL: seconds a write whose connection was lost keeps trying
  // (the standby being promoted) before it fails.
  uint32_t store_failover_wait = 15;
  // A master cluster (Salt's names, and a peer port): masters behind one
  // load balancer acting as one. Empty cluster_id: no cluster. The cluster's
  // keypair, presented to minions by every master, is in cluster_pki_dir
  // (default <pki_dir>/cluster; made by `brine cluster init`); this master's
  // own keypair (pki_dir) identifies it to its peers. A cluster needs the
  // shared store.
  std::string cluster_id;
  std::vector<master_address> cluster_peers;  // host:port of the other masters' peer ports
  uint16_t cluster_port = 4520;
  std::string cluster_pki_dir;
  // The address the other masters reach this one's peer port at; empty: the
  // interface when it is a single address, else this host's name.
  std::string cluster_advertise;
  bool clustered() const { return !cluster_id.empty(); }
  // Scheduled runs (minions' `schedule`): at most this many state runs that
  // this master granted may be in flight at once (0: no limit); a minion
  // asking beyond it is told to retry after about run_retry_after seconds
  // (jittered). With schedule_harmonic, each minion's intervals are rounded
  // to the nearest schedule_harmonic_base * 2^k seconds and told to it.
  uint32_t max_concurrent_runs = 0;
  uint32_t run_retry_after = 10;
  bool schedule_harmonic = false;
  uint32_t schedule_harmonic_base = 900;
  // Compile masters: with state_compile "master", the state runs of the
  // minions state_compile_target names (a compound target over the grains
  // and pillar they send) compile here, on compile_threads threads (0: one
  // per core), answered from a catalog cache of at most
  // catalog_cache_max_bytes (0: none). "minion" (the default): every minion
  // compiles its own, as Salt does.
  std::string state_compile = "minion";
  std::string state_compile_target = "*";
  uint32_t compile_threads = 0;
  uint64_t catalog_cache_max_bytes = 256ull << 20;
};

// master_type: str | failover | disable (masterless: no master connection)
enum class master_mode { hot, failover, disabled };
enum class return_strategy { origin, any };             // master_return_strategy

struct minion_config {
  std::string source;
  std::string id;                       // default: the host name
  // `master`: one address or a list (Salt's default master name is "salt");
  // entries without a port take master_port.
  std::vector<master_address> masters{{"salt", 4506}};
  uint16_t master_port = 4506;
  // `master_type`: str (every master of the list at once: hot multi-master)
  // or failover (one at a time, in list order).
  master_mode master_type = master_mode::hot;
  bool random_master = false;           // shuffle the list once at start
  bool master_failback = false;         // failover: return to an earlier master once it is back
  uint32_t master_failback_interval = 0;  // seconds between probes; 0: master_alive_interval
  int64_t master_tries = -1;            // passes over the list before giving up; -1: forever
  uint32_t retry_dns = 30;              // seconds before resolving a failed name again; 0: give up
  // `master_finger`: one fingerprint or a list (one per master); empty: trust on first use.
  std::vector<std::string> master_fingers;
  return_strategy master_return_strategy = return_strategy::origin;
  // DNS SRV discovery (Puppet's option names): _brine._tcp.<srv_domain>.
  bool use_srv_records = false;
  std::string srv_domain;
  std::string srv_resolver;             // HOST:PORT of the DNS server to ask; empty: the system's
  uint64_t spool_max_bytes = 256ull * 1024 * 1024;  // returns kept for masters, at most
  // `grains:`: custom grains, over the core ones; `grains_blacklist`: globs
  // of collected grain names to leave out (['*']: only the configured ones).
  nlohmann::json grains = nlohmann::json::object();
  std::vector<std::string> grains_blacklist;
  // Masterless runs (brine call --local): Salt's file_roots and pillar_roots.
  // Salt's master_tops_first: the master's tops before the top file's
  // matches in a highstate.
  bool master_tops_first = false;
  // Masterless pillar's ext_pillar and ext_pillar_first, as the master's.
  nlohmann::json ext_pillar = nlohmann::json::array();
  bool ext_pillar_first = false;
  std::map<std::string, std::vector<std::string>> file_roots{{"base", {"/srv/salt"}}};
  std::map<std::string, std::vector<std::string>> pillar_roots{{"base", {"/srv/pillar"}}};
  // Salt's gpg renderer (masterless pillar and state files), as the master's.
  std::string gpg_keydir;
  bool gpg_decrypt_must_succeed = false;
  // What the state compiler reads (Salt's names and defaults): file_client
  // (remote or local), state_top, top_file_merging_strategy (merge, same,
  // merge_all), env_order, state_auto_order.
  std::string file_client = "remote";
  std::string state_top = "top.sls";
  std::string top_file_merging_strategy = "merge";
  std::vector<std::string> env_order;
  bool state_auto_order = true;
  // Applying states (Salt's names): test runs only, the run stops at the
  // first failure, and how the highstate outputter prints.
  bool test = false;
  bool failhard = false;
  std::string state_output = "full";
  bool state_verbose = true;
  // The hosts file the hosts module and host states edit (Salt's
  // `hosts.file`); a relative path is anchored at the config's directory.
  // Empty: not set here (grains or pillar may set it; /etc/hosts otherwise).
  std::string hosts_file;
  // Options of execution modules under Salt's names (`module.option`: the
  // postgres.* ones checked as one value each, any other kept as the data it
  // is): handed to the modules in opts, where Salt's config.get and
  // config.option find them.
  nlohmann::json module_options = nlohmann::json::object();
  std::string pki_dir = "/etc/brine/pki/minion";
  std::string cachedir = "/var/cache/brine/minion";
  uint32_t acceptance_wait_time = 10;   // seconds between retries while pending
  uint32_t acceptance_wait_time_max = 0;  // 0: no growth; else backoff cap while refused
  uint32_t master_alive_interval = 30;  // seconds; bound on detecting a dead master
  // Seconds `brine call` waits for a master to answer its pillar request
  // (Salt's auth_timeout, which bounds salt-call's wait for its master).
  uint32_t auth_timeout = 5;
  uint32_t job_timeout = 3600;          // seconds; default limit for a job without timeout=
  uint32_t http_request_timeout = 3600;  // seconds; one download of an http(s)/ftp source
  std::string hash_type = "sha256";      // file.cached's digest without a source_hash
  uint64_t max_frame_bytes = 16 * 1024 * 1024;
  std::string log_file;
  spdlog::level::level_enum log_level = spdlog::level::info;
  // Salt's `schedule`: jobs run periodically, in name order; `enabled:
  // false` at the top of the mapping turns them all off.
  std::vector<schedule_job> schedule;
  bool schedule_enabled = true;
};

// Parse and validate. Throw base::error with one line such as
//   config /etc/brine/minion: line 4: master_port must be an integer 1..65535, got 70000
// Unknown options are logged as warnings (spdlog::warn) and otherwise ignored.
master_config load_master_config(const std::string& path);
minion_config load_minion_config(const std::string& path);

// The same from YAML text; `source` names it in messages and anchors relative paths.
master_config parse_master_config(const std::string& yaml, const std::string& source);
minion_config parse_minion_config(const std::string& yaml, const std::string& source);

namespace detail {

// One `name: value` line of a config file.
struct simple_option {
  std::string_view name;
  std::string_view value;  // a plain scalar, as yaml-cpp reads it (trailing blanks dropped)
  int line;                // 1-based
};

// The options of `yaml` when the text is nothing but `name: value` lines at
// column 0 whose values are plain one-line scalars, comments and blank lines
// (the usual config file), read without yaml-cpp, whose scanner costs about
// 3,000 instructions a byte: a client command reads its config on every run.
// nullopt for anything else (quotes, lists, maps, anchors, tags, `#` or `: `
// in a value, null values, document markers, tabs, CR, non-ASCII bytes); the
// full parser reads those.
std::optional<std::vector<simple_option>> simple_mapping(std::string_view yaml);

}  // namespace detail
}  // namespace brine::base
