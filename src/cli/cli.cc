#include "cli/cli.h"

#include <csignal>
#include <iostream>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "base/config.h"
#include "base/error.h"
#include "base/log.h"
#include "cli/commands.h"
#include "master/master.h"
#include "minion/minion.h"
#include "swarm/swarm.h"

namespace brine::cli {
namespace {

constexpr const char* k_master_config = "/etc/brine/master";
constexpr const char* k_minion_config = "/etc/brine/minion";

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

}  // namespace

int run(int argc, char** argv) {
  // A peer that closes its end must cost one connection, not the process:
  // OpenSSL writes to sockets without MSG_NOSIGNAL, so a write after a reset
  // would raise SIGPIPE and end a master with thousands of minions. Writes
  // fail with EPIPE instead. (Child processes get SIGPIPE back: process.cc
  // resets every signal to its default before exec.)
  ::signal(SIGPIPE, SIG_IGN);
  // Until a daemon reads its log settings, warnings (config) go to stderr.
  base::init_logging("", spdlog::level::warn, "brine");

  CLI::App app{
      "brine: configuration management and remote execution for fleets of machines.\n"
      "Masters command minions over mutual TLS; see 'brine SUBCOMMAND --help'."};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("brine ") + BRINE_VERSION);

  std::string config;

  auto* master_cmd = app.add_subcommand("master", "Run the master daemon in the foreground");
  master_cmd->add_option("-c,--config", config, "Master config file (YAML)")
      ->default_val(k_master_config);

  auto* minion_cmd = app.add_subcommand("minion", "Run the minion daemon in the foreground");
  minion_cmd->add_option("-c,--config", config, "Minion config file (YAML)")
      ->default_val(k_minion_config);

  key_options key;
  bool key_all = false;
  auto* key_cmd = app.add_subcommand(
      "key", "Manage minion keys (works whether the master runs or not)");
  key_cmd->add_option("-c,--config", config, "Master config file (YAML)")
      ->default_val(k_master_config);
  key_cmd->require_subcommand(1);
  key_cmd->fallthrough();
  auto* key_list = key_cmd->add_subcommand("list", "List keys by state");
  key_list->add_flag("--json", key.json,
                     "Print {\"accepted\": [...], \"pending\": [...], \"rejected\": [...], "
                     "\"denied\": [...]}");
  auto add_match = [&](CLI::App* sub, const std::string& what) {
    auto* id = sub->add_option("ID", key.match, what + " (a glob)");
    auto* all = sub->add_flag("-A,--all", key_all, "All keys the action applies to");
    id->excludes(all);
  };
  auto* key_accept = key_cmd->add_subcommand("accept", "Accept pending keys");
  add_match(key_accept, "Minion id");
  key_accept->add_flag("--include-rejected", key.include_rejected, "Also accept rejected keys");
  key_accept->add_flag("--include-denied", key.include_denied,
                       "Also accept denied keys (replacing the id's key)");
  auto* key_reject = key_cmd->add_subcommand(
      "reject", "Reject keys: the named ids' pending or accepted keys; with --all, pending keys");
  add_match(key_reject, "Minion id");
  key_reject->add_flag("--include-accepted", key.include_accepted,
                       "With --all, also reject accepted keys");
  key_reject->add_flag("--include-denied", key.include_denied, "Also reject denied keys");
  auto* key_delete = key_cmd->add_subcommand("delete", "Delete every key of the ids");
  add_match(key_delete, "Minion id");
  auto* key_finger = key_cmd->add_subcommand("finger", "Print key fingerprints (SHA-256)");
  key_finger->add_option("ID", key.match, "Minion id (a glob); default all, with the master's");
  key_finger->add_flag("--json", key.json, "Print JSON");
  for (auto* sub : {key_list, key_accept, key_reject, key_delete, key_finger}) sub->fallthrough();

  cmd_options cmd;
  std::vector<std::string> cmd_words;
  auto* cmd_cmd = app.add_subcommand("cmd", "Publish a job to minions and print their returns");
  cmd_cmd->add_option("-c,--config", config, "Master config file (YAML)")
      ->default_val(k_master_config);
  cmd_cmd->add_option("-t,--timeout", cmd.timeout, "Seconds to wait for returns")
      ->default_val(5)
      ->check(CLI::PositiveNumber);
  cmd_cmd->add_option("--out", cmd.out, "Output format: nested, json, yaml, raw, txt")
      ->default_val("nested")
      ->check(CLI::IsMember({"nested", "json", "yaml", "raw", "txt"}));
  cmd_cmd->add_flag("--static", cmd.static_out,
                    "Print every return at the end, sorted by minion id");
  cmd_cmd->add_flag("--hide-timeout", cmd.hide_timeout,
                    "No lines for minions that did not return (the exit status still says so)");
  cmd_cmd->add_flag("--show-jid", cmd.show_jid, "Print the job id first");
  cmd_cmd->add_option("-b,--batch,--batch-size", cmd.batch,
                      "Run on N minions (or N%) at a time, a sliding window");
  cmd_cmd->add_option("--batch-wait", cmd.batch_wait,
                      "Seconds to wait after a minion returns before its slot takes the next")
      ->check(CLI::NonNegativeNumber);
  // Salt's target flags: at most one.
  struct target_flag {
    const char* flags;
    const char* type;
    const char* help;
  };
  static const target_flag target_flags[] = {
      {"-E,--pcre", "pcre", "TARGET is a regular expression over minion ids"},
      {"-L,--list", "list", "TARGET is a comma-separated list of minion ids"},
      {"-G,--grain", "grain", "TARGET is GRAIN:GLOB (':' walks nested grains)"},
      {"-P,--grain-pcre", "grain_pcre", "TARGET is GRAIN:REGEX"},
      {"-I,--pillar", "pillar", "TARGET is PILLAR_KEY:GLOB"},
      {"-J,--pillar-pcre", "pillar_pcre", "TARGET is PILLAR_KEY:REGEX"},
      {"-S,--ipcidr", "ipcidr", "TARGET is an IP address or CIDR subnet"},
      {"-N,--nodegroup", "nodegroup", "TARGET is a nodegroup of the master config"},
      {"-C,--compound", "compound", "TARGET is a compound expression (G@os:Debian and web*)"},
  };
  std::vector<CLI::Option*> type_options;
  for (const auto& f : target_flags) {
    type_options.push_back(cmd_cmd->add_flag_callback(
        f.flags, [&cmd, type = f.type] { cmd.tgt_type = type; }, f.help));
  }
  for (auto* a : type_options) {
    for (auto* b : type_options) {
      if (a != b) a->excludes(b);
    }
  }
  cmd_cmd->add_option("--delimiter", cmd.delimiter,
                      "Separator of nested keys in grain and pillar targets")
      ->default_val(":");
  cmd_cmd->add_flag("--async", cmd.async, "Print the job id and return without waiting");
  cmd_cmd->add_flag("!--no-progress", cmd.progress, "No live progress line on a terminal");
  cmd_cmd->add_option("TARGET FUN ARG", cmd_words,
                      "TARGET (a glob over minion ids by default; see the target flags), the function "
                      "(e.g. test.ping, cmd.run), then its arguments: ARG or KEY=VALUE (YAML)")
      ->required()
      ->expected(2, -1);

  job_options job;
  auto* job_cmd = app.add_subcommand("job", "Read the job cache");
  job_cmd->add_option("-c,--config", config, "Master config file (YAML)")
      ->default_val(k_master_config);
  job_cmd->require_subcommand(1);
  job_cmd->fallthrough();
  auto* job_list = job_cmd->add_subcommand("list", "One line per job, newest first");
  job_list->add_option("--limit", job.limit, "At most this many jobs")->default_val(1000);
  job_list->add_option("--function", job.function, "Only jobs of functions matching this glob");
  job_list->add_option("--target", job.target, "Only jobs whose target matches this glob");
  auto* job_kill = job_cmd->add_subcommand(
      "kill", "Stop a running job on its minions (publishes saltutil.kill_job to them)");
  job_kill->add_option("JID", job.jid, "Job id")->required();
  job_kill->add_option("-t,--timeout", job.timeout, "Seconds to wait for the minions")
      ->default_val(5);
  auto* job_show = job_cmd->add_subcommand("show", "A job and its returns");
  job_show->add_option("JID", job.jid, "Job id")->required();
  job_show->add_option("--out", job.out, "Output format")
      ->default_val("nested")
      ->check(CLI::IsMember({"nested", "json"}));
  for (auto* sub : {job_list, job_show, job_kill}) sub->fallthrough();

  std::string event_prefix = "brine/";
  double event_seconds = 0;
  auto* events_cmd = app.add_subcommand("events", "Print the master's events as they happen");
  events_cmd->add_option("-c,--config", config, "Master config file (YAML)")
      ->default_val(k_master_config);
  events_cmd->add_option("--tag,PREFIX", event_prefix, "Only events whose tag starts with this");
  bool event_json = false;
  events_cmd->add_flag("--json", event_json, "One JSON object per event: {tag, data}");
  events_cmd->add_option("--seconds", event_seconds, "Stop after this long (default: never)");

  call_options call;
  std::vector<std::string> call_words;
  std::string call_config = k_minion_config;
  auto* call_cmd = app.add_subcommand(
      "call", "Run a function on this host with the minion's identity, grains and pillar "
              "(salt-call)");
  call_cmd->add_option("-c,--config", call_config, "Minion config file (YAML)")
      ->default_val(k_minion_config);
  call_cmd->add_flag("--local", call.local,
                     "Masterless: pillar compiled here from the minion config's pillar_roots");
  call_cmd->add_option("--out", call.out, "Output format: nested, json, yaml, raw, txt")
      ->default_val("nested")
      ->check(CLI::IsMember({"nested", "json", "yaml", "raw", "txt"}));
  call_cmd->add_option("FUN ARG", call_words,
                       "The function (e.g. grains.items), then its arguments: ARG or KEY=VALUE")
      ->required()
      ->expected(1, -1);

  masters_options masters;
  std::string minion_config = k_minion_config;
  auto* masters_cmd = app.add_subcommand(
      "masters",
      "Print the masters a minion would use: its 'master' list, or its DNS SRV records in "
      "RFC 2782 order (looked up as the minion does)");
  masters_cmd->add_option("-c,--config", minion_config, "Minion config file (YAML)")
      ->default_val(k_minion_config);
  masters_cmd->add_option("--picks", masters.picks,
                          "Draw the SRV order this many times and count each master's first "
                          "choices (how weights spread minions)");
  masters_cmd->add_flag("--json", masters.json, "Print JSON");

  swarm::swarm_options swarm_opts;
  std::string swarm_sources;
  std::string swarm_masters = "127.0.0.1:4506";
  auto* swarm_cmd = app.add_subcommand(
      "swarm", "Run many simulated minions in this process against a real master (scale tests)");
  swarm_cmd->add_option("--master", swarm_masters,
                        "Master address HOST:PORT, or a comma-separated list of them")
      ->default_val("127.0.0.1:4506");
  swarm_cmd->add_option("--master-type", swarm_opts.master_type,
                        "str: every master at once (hot multi-master); failover: one at a time")
      ->default_val("str")
      ->check(CLI::IsMember({"str", "failover"}));
  swarm_cmd->add_flag("--random-master", swarm_opts.random_master,
                      "Each minion shuffles its master list once (spreads failover minions)");
  swarm_cmd->add_flag("--master-failback", swarm_opts.master_failback,
                      "Failover: return to an earlier master once it answers again");
  swarm_cmd->add_option("--master-failback-interval", swarm_opts.master_failback_interval,
                        "Seconds between failback probes (default: master_alive_interval)");
  swarm_cmd->add_option("--master-alive-interval", swarm_opts.master_alive_interval,
                        "Seconds of silence after which a master is dead")
      ->default_val(30)
      ->check(CLI::PositiveNumber);
  swarm_cmd->add_option("--count", swarm_opts.count, "How many minions")->default_val(100);
  swarm_cmd->add_option("--id-prefix", swarm_opts.id_prefix, "Minion ids are PREFIX00001, ...")
      ->default_val("swarm-");
  swarm_cmd->add_option("--keys-dir", swarm_opts.keys_dir,
                        "Directory caching the minions' keys (reused by later runs)")
      ->required();
  swarm_cmd->add_option("--master-finger", swarm_opts.master_finger,
                        "Pin the master's fingerprint (default: trust the first key seen)");
  swarm_cmd->add_option("--connect-rate", swarm_opts.connect_rate,
                        "New connections per second (default: all at once)");
  swarm_cmd->add_option("--source", swarm_sources,
                        "Comma-separated local addresses to spread connections over "
                        "(e.g. 127.0.0.2,127.0.0.3)");
  swarm_cmd->add_option("--threads", swarm_opts.threads, "I/O threads (default: one per core)");
  swarm_cmd->add_option("--acceptance-wait-time", swarm_opts.acceptance_wait_time,
                        "Seconds between key checks while pending")
      ->default_val(10);
  swarm_cmd->add_option("--seconds", swarm_opts.seconds, "Stop after this long (default: never)");
  swarm_cmd->add_option("--grains", swarm_opts.grains_file,
                        "YAML file of grains every minion sends (its id added)");
  swarm_cmd->add_option("--log-level", swarm_opts.log_level, "Log level of the minions")
      ->default_val("error");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  try {
    if (master_cmd->parsed()) return run_master(config);
    if (minion_cmd->parsed()) return run_minion(config);
    if (swarm_cmd->parsed()) {
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
      swarm_opts.source_addresses = split(swarm_sources);
      swarm_opts.masters = split(swarm_masters);
      return swarm::run_swarm(swarm_opts);
    }
    if (call_cmd->parsed()) {
      call.fun = call_words[0];
      call.words.assign(call_words.begin() + 1, call_words.end());
      return call_command(base::load_minion_config(call_config), call);
    }
    if (masters_cmd->parsed()) {
      return masters_command(base::load_minion_config(minion_config), masters);
    }
    auto cfg = base::load_master_config(config);
    if (key_cmd->parsed()) {
      for (auto* sub : key_cmd->get_subcommands()) key.action = sub->get_name();
      if (key_all) key.match = "*";
      // Naming minions says what is meant: `reject m1` rejects m1 whether
      // pending or accepted. `--all` stays as in Salt (pending only unless
      // --include-accepted), so one command cannot cut off a whole fleet.
      if (key.action == "reject" && !key_all) key.include_accepted = true;
      if (key.match.empty()) {
        if (key.action == "list" || key.action == "finger") {
          key.match = "*";
        } else {
          throw base::error("brine key " + key.action + " needs a minion id (a glob) or --all");
        }
      }
      return key_command(cfg, key);
    }
    if (cmd_cmd->parsed()) {
      cmd.target = cmd_words[0];
      cmd.fun = cmd_words[1];
      cmd.words.assign(cmd_words.begin() + 2, cmd_words.end());
      return cmd_command(cfg, cmd);
    }
    if (job_cmd->parsed()) {
      for (auto* sub : job_cmd->get_subcommands()) job.action = sub->get_name();
      return job_command(cfg, job);
    }
    if (events_cmd->parsed()) return events_command(cfg, event_prefix, event_seconds, event_json);
  } catch (const base::error& e) {
    std::cerr << "brine: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "brine: unexpected error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace brine::cli
