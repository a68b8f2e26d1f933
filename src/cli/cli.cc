#include "cli/cli.h"

#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "base/config.h"
#include "base/error.h"
#include "base/log.h"
#include "cli/cmd_line.h"
#include "cli/commands.h"
#include "master/master.h"
#include "minion/minion.h"
#include "swarm/swarm.h"

namespace brine::cli {
namespace {

int run_master(const std::string& path) {
  auto cfg = base::load_master_config(path);
  base::init_logging(cfg.log_file, cfg.log_level, "master");
  master::master m(std::move(cfg));
  return m.run();
}

int run_minion(const std::string& path) {
  auto cfg = base::load_minion_config(path);
  base::init_logging(cfg.log_file, cfg.log_level, "minion");
  minion::minion m(std::move(cfg));
  return m.run();
}

// What a subcommand does once the command line has parsed. Its define_*
// function declares the subcommand's options on a CLI::App, bound to state
// that the runner owns, and returns the runner.
using runner = std::function<int()>;

// `--check-config` reads the file as the daemon would and stops there, so
// that a config can be checked without starting anything (or touching
// pki_dir, cachedir, sock_dir): the package's test checks the example
// configs this way, and an operator can check an edited one before a restart.
constexpr const char* k_check_config_help =
    "Read the config file, print the first error in it (or that it is valid) and exit "
    "without starting";

int check_config(const std::string& path) {
  std::cout << "config " << path << ": valid" << std::endl;
  return 0;
}

// `brine master` and `brine minion`: -c CONFIG, and --check-config, which
// loads the config with `load` instead of running the daemon with `run`.
template <class Run, class Load>
runner define_daemon(CLI::App& sub, const char* config_help, const char* default_config, Run run,
                     Load load) {
  struct state {
    std::string config;
    bool check = false;
  };
  auto s = std::make_shared<state>();
  sub.add_option("-c,--config", s->config, config_help)->default_val(default_config);
  sub.add_flag("--check-config", s->check, k_check_config_help);
  return [s, run, load] {
    if (!s->check) return run(s->config);
    load(s->config);
    return check_config(s->config);
  };
}

runner define_master(CLI::App& sub) {
  return define_daemon(
      sub, "Master config file (YAML)", k_master_config, run_master, [](const std::string& path) {
        auto cfg = base::load_master_config(path);
        // What the master checks as it starts, beyond the file's syntax.
        if (cfg.state_compile == "master") {
          master::compile_target(cfg, target::nodegroups_from_json(cfg.nodegroups));
        }
      });
}

runner define_minion(CLI::App& sub) {
  return define_daemon(sub, "Minion config file (YAML)", k_minion_config, run_minion,
                       [](const std::string& path) { base::load_minion_config(path); });
}

runner define_key(CLI::App& key_cmd) {
  struct state {
    std::string config;
    key_options key;
    bool all = false;
  };
  auto s = std::make_shared<state>();
  key_cmd.add_option("-c,--config", s->config, "Master config file (YAML)")
      ->default_val(k_master_config);
  key_cmd.require_subcommand(1);
  key_cmd.fallthrough();
  auto* key_list = key_cmd.add_subcommand("list", "List keys by state");
  key_list->add_flag("--json", s->key.json,
                     "Print {\"accepted\": [...], \"pending\": [...], \"rejected\": [...], "
                     "\"denied\": [...]}");
  auto add_match = [&s](CLI::App* sub, const std::string& what) {
    auto* id = sub->add_option("ID", s->key.match, what + " (a glob)");
    auto* all = sub->add_flag("-A,--all", s->all, "All keys the action applies to");
    id->excludes(all);
  };
  auto* key_accept = key_cmd.add_subcommand("accept", "Accept pending keys");
  add_match(key_accept, "Minion id");
  key_accept->add_flag("--include-rejected", s->key.include_rejected, "Also accept rejected keys");
  key_accept->add_flag("--include-denied", s->key.include_denied,
                       "Also accept denied keys (replacing the id's key)");
  auto* key_reject = key_cmd.add_subcommand(
      "reject", "Reject keys: the named ids' pending or accepted keys; with --all, pending keys");
  add_match(key_reject, "Minion id");
  key_reject->add_flag("--include-accepted", s->key.include_accepted,
                       "With --all, also reject accepted keys");
  key_reject->add_flag("--include-denied", s->key.include_denied, "Also reject denied keys");
  auto* key_delete = key_cmd.add_subcommand("delete", "Delete every key of the ids");
  add_match(key_delete, "Minion id");
  auto* key_finger = key_cmd.add_subcommand("finger", "Print key fingerprints (SHA-256)");
  key_finger->add_option("ID", s->key.match, "Minion id (a glob); default all, with the master's");
  key_finger->add_flag("--json", s->key.json, "Print JSON");
  for (auto* sub : {key_list, key_accept, key_reject, key_delete, key_finger}) sub->fallthrough();

  return [s, &key_cmd] {
    auto cfg = base::load_master_config(s->config);
    key_options& key = s->key;
    for (auto* sub : key_cmd.get_subcommands()) key.action = sub->get_name();
    if (s->all) key.match = "*";
    // Naming minions says what is meant: `reject m1` rejects m1 whether
    // pending or accepted. `--all` stays as in Salt (pending only unless
    // --include-accepted), so one command cannot cut off a whole fleet.
    if (key.action == "reject" && !s->all) key.include_accepted = true;
    if (key.match.empty()) {
      if (key.action == "list" || key.action == "finger") {
        key.match = "*";
      } else {
        throw base::error("brine key " + key.action + " needs a minion id (a glob) or --all");
      }
    }
    return key_command(cfg, key);
  };
}

runner run_cmd(std::shared_ptr<cmd_line> line) {
  return [line] {
    auto cfg = base::load_master_config(line->config);
    return cmd_command(cfg, line->cmd);
  };
}

runner define_cmd(CLI::App& cmd_cmd) {
  auto line = std::make_shared<cmd_line>();
  declare_cmd_options(cmd_cmd, *line);
  auto run = run_cmd(line);
  return [line, run] {
    finish(*line);
    return run();
  };
}

runner define_job(CLI::App& job_cmd) {
  struct state {
    std::string config;
    job_options job;
  };
  auto s = std::make_shared<state>();
  job_options& job = s->job;
  job_cmd.add_option("-c,--config", s->config, "Master config file (YAML)")
      ->default_val(k_master_config);
  job_cmd.require_subcommand(1);
  job_cmd.fallthrough();
  auto* job_list = job_cmd.add_subcommand("list", "One line per job, newest first");
  job_list->add_option("--limit", job.limit, "At most this many jobs")->default_val(1000);
  job_list->add_option("--function", job.function, "Only jobs of functions matching this glob");
  job_list->add_option("--target", job.target, "Only jobs whose target matches this glob");
  job_list->add_option("--out", job.out,
                       "Output format: nested (a line per job) or json (each job's minions, "
                       "who returned, who was not reached and who is running)")
      ->default_val("nested")
      ->check(CLI::IsMember({"nested", "json"}));
  auto* job_kill = job_cmd.add_subcommand(
      "kill", "Stop a running job on its minions (publishes saltutil.kill_job to them)");
  job_kill->add_option("JID", job.jid, "Job id")->required();
  job_kill->add_option("-t,--timeout", job.timeout, "Seconds to wait for the minions")
      ->default_val(5);
  auto* job_show = job_cmd.add_subcommand("show", "A job and its returns");
  job_show->add_option("JID", job.jid, "Job id")->required();
  job_show->add_option("--out", job.out, "Output format")
      ->default_val("nested")
      ->check(CLI::IsMember({"nested", "json"}));
  for (auto* sub : {job_list, job_show, job_kill}) sub->fallthrough();

  return [s, &job_cmd] {
    auto cfg = base::load_master_config(s->config);
    for (auto* sub : job_cmd.get_subcommands()) s->job.action = sub->get_name();
    return job_command(cfg, s->job);
  };
}

runner define_report(CLI::App& report_cmd) {
  struct state {
    std::string config;
    report_options report;
  };
  auto s = std::make_shared<state>();
  report_options& r = s->report;
  report_cmd.add_option("-c,--config", s->config, "Master config file (YAML)")
      ->default_val(k_master_config);
  report_cmd.require_subcommand(1);
  report_cmd.fallthrough();
  auto* list = report_cmd.add_subcommand(
      "list", "One line per state run, newest first: status, start, duration, counts");
  list->add_option("--minion", r.minion_glob, "Only minions matching this glob");
  list->add_option("--status", r.status, "Only runs that ended so")
      ->check(CLI::IsMember({"failed", "changed", "unchanged"}));
  list->add_option("--since", r.since,
                   "Only runs started since then: a duration back from now (30m, 2h, 7d, 1w) "
                   "or a UTC time (2025-01-31, 2025-01-31T14:00)");
  list->add_option("--limit", r.limit, "At most this many reports")->default_val(1000);
  list->add_flag("--last", r.last,
                 "Each minion's latest run only (the other filters then apply to it)");
  list->add_option("--out", r.out, "Output format: table, json or yaml")
      ->default_val("table")
      ->check(CLI::IsMember({"table", "json", "yaml"}));
  auto* show = report_cmd.add_subcommand(
      "show", "One run's states, as Salt's highstate outputter prints them");
  show->add_option("JID", r.jid, "Job id")->required();
  show->add_option("MINION", r.minion, "Minion id")->required();
  show->add_option("--out", r.out,
                   "Output format: highstate, json (the report and the raw "
                   "return) or yaml")
      ->default_val("highstate")
      ->check(CLI::IsMember({"highstate", "json", "yaml"}));
  show->add_option("--state-output", r.state_output,
                   "The highstate outputter's form: full, terse, mixed, changes (default full)");
  show->add_option("--state-verbose", r.state_verbose,
                   "false: leave out successful states that changed nothing");
  show->add_flag("--no-color", r.no_color, "No colours, even on a terminal");
  show->add_flag("--force-color", r.force_color, "Colours, even when not on a terminal");
  auto* states = report_cmd.add_subcommand(
      "states", "Which minions ran state ID X, and with what result: one line per state, "
                "newest run first");
  states->add_option("--id", r.state_id, "The state ID (__id__)")->required();
  states->add_option("--minion", r.minion_glob, "Only minions matching this glob");
  states->add_option("--since", r.since,
                     "Only runs started since then: a duration back from now (30m, 2h, 7d, 1w) "
                     "or a UTC time (2025-01-31, 2025-01-31T14:00)");
  states->add_option("--limit", r.limit, "At most this many states")->default_val(1000);
  states->add_flag("--last", r.last, "Only in each minion's latest run");
  states->add_option("--out", r.out, "Output format: table, json or yaml")
      ->default_val("table")
      ->check(CLI::IsMember({"table", "json", "yaml"}));
  for (auto* sub : {list, show, states}) sub->fallthrough();

  return [s, &report_cmd] {
    auto cfg = base::load_master_config(s->config);
    for (auto* sub : report_cmd.get_subcommands()) s->report.action = sub->get_name();
    return report_command(cfg, s->report);
  };
}

runner define_inventory(CLI::App& inv) {
  struct state {
    std::string config;
    inventory_options inventory;
  };
  auto s = std::make_shared<state>();
  inventory_options& o = s->inventory;
  inv.add_option("-c,--config", s->config, "Master config file (YAML)")
      ->default_val(k_master_config);
  declare_target_flags(inv, o.tgt_type);
  inv.add_option("--delimiter", o.delimiter, "Separator of nested keys in grain and pillar targets")
      ->default_val(":");
  inv.add_option("--fields", o.fields,
                 "Comma-separated fields: grain paths (os, ip4_interfaces.eth0 or "
                 "ip4_interfaces:eth0), pillar.KEY (only keys inventory_pillar_keys allows), "
                 "and id, key, key.fingerprint, master, connected, last_seen, last_run.status, "
                 "last_run.started, last_run.jid, last_run.function, last_run.test (default: "
                 "id,os,osrelease,master,last_seen,last_run.status,last_run.started)");
  inv.add_option("--out", o.out, "Output format: table, json, yaml or csv")
      ->default_val("table")
      ->check(CLI::IsMember({"table", "json", "yaml", "csv"}));
  inv.add_option("TARGET", o.target,
                 "Which accepted minions (default all): a glob over ids, or as the target flag "
                 "says; matched against the master's cache, not asked of the minions");
  return [s] {
    auto cfg = base::load_master_config(s->config);
    return inventory_command(cfg, s->inventory);
  };
}

runner define_store(CLI::App& store_cmd) {
  struct state {
    std::string config;
    store_options store;
  };
  auto s = std::make_shared<state>();
  store_cmd.add_option("-c,--config", s->config, "Master config file (YAML)")
      ->default_val(k_master_config);
  store_cmd.require_subcommand(1);
  store_cmd.fallthrough();
  auto* migrate = store_cmd.add_subcommand(
      "migrate", "Create the store's schema or bring it to this brine's version");
  auto* check = store_cmd.add_subcommand(
      "check", "Reach the store and print its schema version and row counts");
  for (auto* sub : {migrate, check}) {
    sub->add_flag("--json", s->store.json, "Print JSON");
    sub->fallthrough();
  }
  return [s, &store_cmd] {
    auto cfg = base::load_master_config(s->config);
    for (auto* sub : store_cmd.get_subcommands()) s->store.action = sub->get_name();
    return store_command(cfg, s->store);
  };
}

runner define_cluster(CLI::App& cluster_cmd) {
  struct state {
    std::string config;
    cluster_options cluster;
  };
  auto s = std::make_shared<state>();
  cluster_cmd.add_option("-c,--config", s->config, "Master config file (YAML)")
      ->default_val(k_master_config);
  cluster_cmd.require_subcommand(1);
  cluster_cmd.fallthrough();
  auto* init = cluster_cmd.add_subcommand(
      "init", "Make the cluster's keypair in cluster_pki_dir (once per cluster; then copy it)");
  auto* status = cluster_cmd.add_subcommand(
      "status", "Every master of the cluster: alive, connected minions, jobs/s, returns/s, store "
                "latency, revision served");
  auto* remove = cluster_cmd.add_subcommand(
      "remove-peer", "Take a master out of the cluster: it closes its minions' connections and "
                     "stops; they move to the others");
  remove->add_option("MASTER", s->cluster.name, "The master (host:port, as status lists it)")
      ->required();
  for (auto* sub : {init, status}) sub->add_flag("--json", s->cluster.json, "Print JSON");
  for (auto* sub : {init, status, remove}) sub->fallthrough();
  return [s, &cluster_cmd] {
    auto cfg = base::load_master_config(s->config);
    for (auto* sub : cluster_cmd.get_subcommands()) s->cluster.action = sub->get_name();
    return cluster_command(cfg, s->cluster);
  };
}

runner define_fileserver(CLI::App& fs_cmd) {
  struct state {
    std::string config;
    fileserver_options fs;
  };
  auto s = std::make_shared<state>();
  fs_cmd.add_option("-c,--config", s->config, "Master config file (YAML)")
      ->default_val(k_master_config);
  fs_cmd.require_subcommand(1);
  fs_cmd.fallthrough();
  auto* update = fs_cmd.add_subcommand(
      "update",
      "Fetch every gitfs remote, pin its branches and tags in the store (every master of the "
      "store switches to them) and print the revisions pinned");
  update->add_flag("--json", s->fs.json, "Print JSON");
  update->add_option("--timeout", s->fs.timeout, "Seconds to wait for the master")
      ->default_val(300);
  update->fallthrough();
  return [s, &fs_cmd] {
    auto cfg = base::load_master_config(s->config);
    for (auto* sub : fs_cmd.get_subcommands()) s->fs.action = sub->get_name();
    return fileserver_command(cfg, s->fs);
  };
}

runner define_schedule(CLI::App& schedule_cmd) {
  struct state {
    std::string config;
    schedule_options plan;
    std::string type_flag;
  };
  auto s = std::make_shared<state>();
  schedule_cmd.add_option("-c,--config", s->config, "Master config file (YAML)")
      ->default_val(k_master_config);
  schedule_cmd.require_subcommand(1);
  schedule_cmd.fallthrough();
  auto* plan = schedule_cmd.add_subcommand(
      "plan",
      "The runs the minions' schedules (as they reported them to the master) start per minute");
  plan->add_option("TARGET", s->plan.target, "Minions (a glob over ids; default all)");
  plan->add_option("--tgt-type", s->plan.tgt_type,
                   "Target type: glob, pcre, list, grain, grain_pcre, pillar, compound, ...")
      ->default_val("glob");
  plan->add_option("--minutes", s->plan.minutes, "How many minutes from now (1..10080)")
      ->default_val(60);
  plan->add_option("--out", s->plan.out, "table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->default_val("table");
  plan->fallthrough();
  return [s] {
    auto cfg = base::load_master_config(s->config);
    return schedule_command(cfg, s->plan);
  };
}

runner define_events(CLI::App& events_cmd) {
  struct state {
    std::string config;
    std::string prefix = "brine/";
    double seconds = 0;
    bool json = false;
  };
  auto s = std::make_shared<state>();
  events_cmd.add_option("-c,--config", s->config, "Master config file (YAML)")
      ->default_val(k_master_config);
  events_cmd.add_option("--tag,PREFIX", s->prefix, "Only events whose tag starts with this");
  events_cmd.add_flag("--json", s->json, "One JSON object per event: {tag, data}");
  events_cmd.add_option("--seconds", s->seconds, "Stop after this long (default: never)");
  return [s] {
    auto cfg = base::load_master_config(s->config);
    return events_command(cfg, s->prefix, s->seconds, s->json);
  };
}

runner define_call(CLI::App& call_cmd) {
  struct state {
    std::string config = k_minion_config;
    call_options call;
    std::vector<std::string> words;
  };
  auto s = std::make_shared<state>();
  call_cmd.add_option("-c,--config", s->config, "Minion config file (YAML)")
      ->default_val(k_minion_config);
  call_cmd.add_flag("--local", s->call.local,
                    "Masterless: pillar compiled here from the minion config's pillar_roots");
  call_cmd
      .add_option("--out", s->call.out,
                  "Output format: nested, json, yaml, raw, txt, highstate (default: highstate "
                  "for the state functions, nested for the rest)")
      ->check(CLI::IsMember({"nested", "json", "yaml", "raw", "txt", "highstate"}));
  call_cmd.add_option("--state-output", s->call.state_output,
                      "The highstate outputter's form: full, terse, mixed, changes (default: the "
                      "minion's state_output option, else full)");
  call_cmd.add_option("--state-verbose", s->call.state_verbose,
                      "false: leave out successful states that changed nothing (default: the "
                      "minion's state_verbose option, else true)");
  call_cmd.add_flag("--no-color", s->call.no_color, "No colours, even on a terminal");
  call_cmd.add_flag("--force-color", s->call.force_color, "Colours, even when not on a terminal");
  call_cmd.add_flag("--retcode-passthrough", s->call.retcode_passthrough,
                    "Exit with the function's retcode (what brine call always does; accepted "
                    "for salt-call's users)");
  call_cmd
      .add_option("FUN ARG", s->words,
                  "The function (e.g. grains.items), then its arguments: ARG or KEY=VALUE")
      ->required()
      ->expected(1, -1);
  return [s] {
    s->call.fun = s->words[0];
    s->call.words.assign(s->words.begin() + 1, s->words.end());
    return call_command(base::load_minion_config(s->config), s->call);
  };
}

runner define_masters(CLI::App& masters_cmd) {
  struct state {
    std::string config = k_minion_config;
    masters_options masters;
  };
  auto s = std::make_shared<state>();
  masters_cmd.add_option("-c,--config", s->config, "Minion config file (YAML)")
      ->default_val(k_minion_config);
  masters_cmd.add_option("--picks", s->masters.picks,
                         "Draw the SRV order this many times and count each master's first "
                         "choices (how weights spread minions)");
  masters_cmd.add_flag("--json", s->masters.json, "Print JSON");
  return [s] { return masters_command(base::load_minion_config(s->config), s->masters); };
}

runner define_swarm(CLI::App& swarm_cmd) {
  struct state {
    swarm::swarm_options opts;
    std::string sources;
    std::string masters = "127.0.0.1:4506";
    std::string schedule;
    bool no_spread = false;
  };
  auto s = std::make_shared<state>();
  swarm::swarm_options& o = s->opts;
  swarm_cmd
      .add_option("--master", s->masters,
                  "Master address HOST:PORT, or a comma-separated list of them")
      ->default_val("127.0.0.1:4506");
  swarm_cmd
      .add_option("--master-type", o.master_type,
                  "str: every master at once (hot multi-master); failover: one at a time")
      ->default_val("str")
      ->check(CLI::IsMember({"str", "failover"}));
  swarm_cmd.add_flag("--random-master", o.random_master,
                     "Each minion shuffles its master list once (spreads failover minions)");
  swarm_cmd.add_flag("--master-failback", o.master_failback,
                     "Failover: return to an earlier master once it answers again");
  swarm_cmd.add_option("--master-failback-interval", o.master_failback_interval,
                       "Seconds between failback probes (default: master_alive_interval)");
  swarm_cmd
      .add_option("--master-alive-interval", o.master_alive_interval,
                  "Seconds of silence after which a master is dead")
      ->default_val(30)
      ->check(CLI::PositiveNumber);
  swarm_cmd.add_option("--count", o.count, "How many minions")->default_val(100);
  swarm_cmd.add_option("--id-prefix", o.id_prefix, "Minion ids are PREFIX00001, ...")
      ->default_val("swarm-");
  swarm_cmd
      .add_option("--keys-dir", o.keys_dir,
                  "Directory caching the minions' keys (reused by later runs)")
      ->required();
  swarm_cmd.add_option("--master-finger", o.master_finger,
                       "Pin the master's fingerprint (default: trust the first key seen)");
  swarm_cmd.add_option("--connect-rate", o.connect_rate,
                       "New connections per second (default: all at once)");
  swarm_cmd.add_option("--source", s->sources,
                       "Comma-separated local addresses to spread connections over "
                       "(e.g. 127.0.0.2,127.0.0.3)");
  swarm_cmd.add_option("--threads", o.threads, "I/O threads (default: one per core)");
  swarm_cmd
      .add_option("--acceptance-wait-time", o.acceptance_wait_time,
                  "Seconds between key checks while pending")
      ->default_val(10);
  swarm_cmd.add_option("--seconds", o.seconds, "Stop after this long (default: never)");
  swarm_cmd.add_option("--grains", o.grains_file,
                       "YAML file of grains every minion sends (its id added)");
  swarm_cmd.add_flag("--states", o.states,
                     "The minions apply states (state.apply, state.sls, state.highstate) and "
                     "have every execution function of a real minion, acting on this machine; "
                     "salt:// files come from the master into one cache for the swarm "
                     "(KEYS_DIR/PREFIXfiles). Default: test.* only");
  swarm_cmd.add_option("--schedule", s->schedule,
                       "FUN:SECONDS: every minion runs FUN every SECONDS as a scheduled job "
                       "(granted and recorded by the master; state.apply and state.highstate "
                       "without --states are simulated)");
  swarm_cmd.add_flag("--schedule-no-spread", s->no_spread,
                     "Every minion's scheduled runs at offset 0 of the interval (all at once), "
                     "instead of spread by its id");
  swarm_cmd.add_option("--schedule-run-ms", o.schedule_run_ms,
                       "How long a simulated state run takes (milliseconds)")
      ->default_val(0);
  swarm_cmd.add_option("--log-level", o.log_level, "Log level of the minions")
      ->default_val("error");
  return [s] {
    auto split = [](const std::string& text) {
      std::vector<std::string> out;
      std::string item;
      for (char ch : text + ",") {
        if (ch != ',') {
          item += ch;
        } else if (!item.empty()) {
          out.push_back(std::exchange(item, ""));
        }
      }
      return out;
    };
    if (!s->schedule.empty()) {
      auto colon = s->schedule.rfind(':');
      uint64_t seconds = 0;
      try {
        if (colon == std::string::npos) throw std::invalid_argument("no colon");
        size_t used = 0;
        seconds = std::stoull(s->schedule.substr(colon + 1), &used);
        if (used != s->schedule.size() - colon - 1 || seconds == 0 || seconds > 86400 * 366) {
          throw std::invalid_argument("bad seconds");
        }
      } catch (const std::exception&) {
        throw base::error("--schedule must be FUN:SECONDS (e.g. test.ping:60), got " +
                          s->schedule);
      }
      s->opts.schedule_function = s->schedule.substr(0, colon);
      s->opts.schedule_seconds = static_cast<uint32_t>(seconds);
      s->opts.schedule_spread = !s->no_spread;
    }
    s->opts.source_addresses = split(s->sources);
    s->opts.masters = split(s->masters);
    return swarm::run_swarm(s->opts);
  };
}

struct subcommand {
  const char* name;
  const char* description;
  runner (*define)(CLI::App&);
  bool daemon;  // runs until stopped (see runs_daemon())
};

// In the order of `brine --help`.
constexpr subcommand k_subcommands[] = {
    {"master", "Run the master daemon in the foreground", define_master, true},
    {"minion", "Run the minion daemon in the foreground", define_minion, true},
    {"key", "Manage minion keys (works whether the master runs or not)", define_key, false},
    {"cmd", "Publish a job to minions and print their returns", define_cmd, false},
    {"job", "Read the job cache", define_job, false},
    {"report", "Read the state-run reports: list runs, show one run's states", define_report,
     false},
    {"inventory",
     "The accepted minions a target names, with chosen grains, connected master, last seen and "
     "last run, from the store",
     define_inventory, false},
    {"store", "Set up or check the master's store (SQLite or a shared PostgreSQL)", define_store,
     false},
    {"cluster", "Set up and watch a master cluster: init, status, remove-peer", define_cluster,
     false},
    {"fileserver", "The master's file server: update pins the gitfs remotes' revisions",
     define_fileserver, false},
    {"schedule", "Scheduled runs: plan shows the runs the minions' schedules start per minute",
     define_schedule, false},
    {"events", "Print the master's events as they happen", define_events, false},
    {"call",
     "Run a function on this host with the minion's identity, grains and pillar (salt-call)",
     define_call, false},
    {"masters",
     "Print the masters a minion would use: its 'master' list, or its DNS SRV records in "
     "RFC 2782 order (looked up as the minion does)",
     define_masters, false},
    {"swarm", "Run many simulated minions in this process against a real master (scale tests)",
     define_swarm, true},
};

// The subcommand that CLI11 will parse the rest of the line into: the first
// argument that names one. The top level has no option that takes a value
// and no positional, so no earlier argument can stand for anything else, and
// once one subcommand is parsed no second name counts (require_subcommand(1)).
// After "--" every argument is positional.
const subcommand* named_subcommand(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--") return nullptr;
    for (const auto& s : k_subcommands) {
      if (arg == s.name) return &s;
    }
  }
  return nullptr;
}

// Runs a subcommand, its errors printed as one line.
int run_guarded(const runner& run) {
  try {
    return run();
  } catch (const base::error& e) {
    std::cerr << "brine: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "brine: unexpected error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace

bool runs_daemon(int argc, char** argv) {
  const subcommand* named = named_subcommand(argc, argv);
  return named != nullptr && named->daemon;
}

int run(int argc, char** argv) {
  // A peer that closes its end must cost one connection, not the process:
  // OpenSSL writes to sockets without MSG_NOSIGNAL, so a write after a reset
  // would raise SIGPIPE and end a master with thousands of minions. Writes
  // fail with EPIPE instead. (Child processes get SIGPIPE back: process.cc
  // resets every signal to its default before exec.)
  ::signal(SIGPIPE, SIG_IGN);

  // A plain `brine cmd` line (nearly every one) is read without declaring
  // its options on CLI11 (cmd_line.h). Until a daemon reads its log
  // settings, warnings (config) go to stderr.
  if (auto plain = read_plain_cmd_line(argc, argv)) {
    base::init_logging("", spdlog::level::warn, "brine");
    return run_guarded(run_cmd(std::make_shared<cmd_line>(std::move(*plain))));
  }

  CLI::App app{
      "brine: configuration management and remote execution for fleets of machines.\n"
      "Masters command minions over mutual TLS; see 'brine SUBCOMMAND --help'."};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("brine ") + BRINE_VERSION);

  // Only the subcommand that the command line names gets its options (and
  // its subcommands): a client command lives a few milliseconds, and
  // declaring every subcommand's options cost more of them than the
  // command's own work. The others are there by name and description, which
  // is all that `brine --help` and CLI11's parsing of the top level read.
  const subcommand* named = named_subcommand(argc, argv);
  runner run_named;
  for (const auto& s : k_subcommands) {
    auto* sub = app.add_subcommand(s.name, s.description);
    if (&s == named) run_named = s.define(*sub);
  }

  // CLI11 answers --help and --version by throwing, and a process's first
  // exception costs a search of the unwind tables; the two plainest asks
  // get the same output without one.
  if (argc == 2) {
    std::string_view arg = argv[1];
    if (arg == "--help" || arg == "-h") {
      app.name(argv[0]);  // as parse() names the top level
      std::cout << app.help();
      return 0;
    }
    if (arg == "--version") {
      std::cout << "brine " << BRINE_VERSION << std::endl;
      return 0;
    }
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (!run_named) {
    // A parse that succeeded went into exactly one subcommand, and
    // named_subcommand() found the one CLI11 parses into.
    std::fprintf(stderr, "brine: a subcommand was parsed whose options were never declared\n");
    std::abort();
  }

  base::init_logging("", spdlog::level::warn, "brine");
  return run_guarded(run_named);
}

}  // namespace brine::cli
