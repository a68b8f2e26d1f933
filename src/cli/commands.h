#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/config.h"
#include "store/store.h"

namespace brine::cli {

// Where the daemons and the commands read their config unless -c says.
inline constexpr const char* k_master_config = "/etc/brine/master";
inline constexpr const char* k_minion_config = "/etc/brine/minion";

struct key_options {
  std::string action;  // list, accept, reject, delete, finger
  std::string match;   // glob; "*" for --all
  bool json = false;
  bool include_rejected = false;
  bool include_accepted = false;
  bool include_denied = false;
};
int key_command(const base::master_config& cfg, const key_options& o);

struct cmd_options {
  std::string target;
  std::string tgt_type = "glob";  // Salt's tgt_type
  std::string delimiter = ":";
  std::string fun;
  std::vector<std::string> words;  // ARG and KEY=VALUE
  double timeout = 5;
  std::string out;  // nested, json, yaml, raw, txt, highstate; empty: the function's own
  std::string state_output;  // the highstate outputter's form (default full)
  std::optional<bool> state_verbose;
  bool no_color = false;
  bool force_color = false;
  bool async = false;
  bool progress = true;
  bool static_out = false;     // --static: everything at the end, sorted by id
  bool hide_timeout = false;   // --hide-timeout: no lines for minions that did not return
  bool show_jid = false;       // --show-jid
  std::string batch;           // --batch N or N%: a sliding window of minions
  double batch_wait = 0;       // --batch-wait: seconds before a freed slot is used
};
int cmd_command(const base::master_config& cfg, const cmd_options& o);

struct job_options {
  std::string action;  // list, show, kill
  std::string jid;
  std::string out = "nested";
  size_t limit = 1000;
  std::string function;  // list: a glob over function names
  std::string target;    // list: a glob over target expressions
  double timeout = 5;    // kill
};
int job_command(const base::master_config& cfg, const job_options& o);

struct report_options {
  std::string action;  // list, show, states
  std::string state_id;  // states
  std::string jid;     // show
  std::string minion;  // show
  // list
  std::string minion_glob;
  std::string status;  // failed, changed, unchanged; empty: any
  std::string since;   // a duration back from now or a UTC time (since_ms)
  size_t limit = 1000;
  bool last = false;  // each minion's latest report only
  // list: table (default), json, yaml; show: highstate (default), json, yaml
  std::string out;
  std::string state_output;  // show: the highstate outputter's form
  std::optional<bool> state_verbose;
  bool no_color = false;
  bool force_color = false;
};
int report_command(const base::master_config& cfg, const report_options& o);

struct inventory_options {
  std::string target;             // empty: every accepted minion
  std::string tgt_type = "glob";  // as brine cmd's target flags set it
  std::string delimiter = ":";
  std::string fields;  // comma-separated; empty: inventory::k_default_fields
  std::string out = "table";  // table, json, yaml, csv
};
// `brine inventory`: the accepted minions a target names, with the fields
// asked for, from the store (never from the minions). Exit 3 for a bad
// field, target or a pillar key inventory_pillar_keys does not allow.
int inventory_command(const base::master_config& cfg, const inventory_options& o);

// `brine report list --since TEXT` as unix milliseconds: a duration back from
// `now_ms` (30m, 2h, 7d, 1w, 1h30m) or a UTC time (2025-01-31,
// 2025-01-31T14:00, 2025-01-31 14:00:05). Throws base::error saying both forms.
int64_t since_ms(const std::string& text, int64_t now_ms);

struct call_options {
  std::string fun;
  std::vector<std::string> words;  // ARG and KEY=VALUE
  bool local = false;              // masterless: pillar from the minion's pillar_roots
  std::string out;                 // empty: highstate for state functions, else nested
  std::string state_output;        // empty: the minion's option
  std::optional<bool> state_verbose;
  bool no_color = false;
  bool force_color = false;
  bool retcode_passthrough = false;  // always so; accepted as salt-call's flag
};
int call_command(base::minion_config cfg, const call_options& o);

int events_command(const base::master_config& cfg, const std::string& prefix, double seconds,
                   bool json_out);

struct masters_options {
  uint64_t picks = 0;  // draws of the RFC 2782 order to count first choices over
  bool json = false;
};
int masters_command(const base::minion_config& cfg, const masters_options& o);

// The store the master config names, opened as a brine command does: the
// changes made through it reach the masters sharing it with origin "cli".
// `must_exist`: a SQLite file that is not there is an error naming the
// config, not a new empty database.
std::unique_ptr<store::store> open_store(const base::master_config& cfg, bool must_exist,
                                         bool migrate = true);

struct fileserver_options {
  std::string action;  // update
  bool json = false;
  int timeout = 300;  // seconds the master may take to fetch every remote
};
// `brine fileserver update`: the master fetches its gitfs remotes and pins
// their revisions in the store, for every master of it.
int fileserver_command(const base::master_config& cfg, const fileserver_options& o);

struct schedule_options {
  std::string target = "*";
  std::string tgt_type = "glob";
  uint32_t minutes = 60;
  std::string out = "table";
};
// `brine schedule plan`: the runs the targeted minions' schedules start per
// minute, as the running master knows them.
int schedule_command(const base::master_config& cfg, const schedule_options& o);

struct store_options {
  std::string action;  // migrate, check
  bool json = false;
};
int store_command(const base::master_config& cfg, const store_options& o);

struct cluster_options {
  std::string action;  // init, status, remove-peer
  std::string name;    // remove-peer: the master, as `brine cluster status` names it
  bool json = false;
};
int cluster_command(const base::master_config& cfg, const cluster_options& o);

}  // namespace brine::cli
