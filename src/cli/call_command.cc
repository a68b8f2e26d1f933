// brine call: runs one execution function on this host with the minion's
// identity, grains and pillar, as salt-call does. The pillar comes from the
// minion's master, compiled for this run with the grains just collected
// (minion/master_pillar.h); no master answering is an error, as it is for
// salt-call. With file_client remote (the default) its salt:// files, the
// state tree included, come from that master's file server over the same
// connection. --local is masterless: the pillar is compiled here from the
// minion config's pillar_roots.

#include <unistd.h>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <iostream>
#include <memory>
#include <vector>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "cli/commands.h"
#include "cli/highstate_output.h"
#include "cli/output.h"
#include "base/fs.h"
#include "fileserver/client.h"
#include "fileserver/remote.h"
#include "minion/context.h"
#include "minion/master_pillar.h"
#include "modules/registry.h"
#include "pillar/pillar.h"
#include "ext_pillar/ext_pillar.h"
#include "state/bridge.h"
#include "state/high.h"
#include "state/highstate.h"
#include "state/pillar_salt.h"
#include "apply/state_functions.h"
#include "state/gpg.h"
#include "state/state_mod.h"
#include "states/registry.h"

namespace brine::cli {

using nlohmann::json;

namespace {

nlohmann::ordered_json local_pillar(const base::minion_config& cfg, const json& grains,
                  const modules::registry& functions, modules::minion_context& ctx) {
  pillar::options o;
  o.roots = cfg.pillar_roots;
  // Pillar templates call the minion's execution functions.
  o.salt = state::pillar_salt(cfg.pillar_roots, functions, &ctx, ctx.opts());
  o.gpg = state::gpg_decryptor_of(ctx.opts());
  o.ext_pillars = ext_pillar::builtin({cfg.module_options, {}});
  try {
    o.ext_pillar = pillar::parse_ext_pillar(cfg.ext_pillar, o.ext_pillars);
  } catch (const base::error& e) {
    throw base::error("config " + cfg.source + ": " + e.what());
  }
  o.ext_pillar_first = cfg.ext_pillar_first;
  auto compiler = pillar::compiler::load(o);
  auto result = compiler.compile(cfg.id, &grains);
  nlohmann::ordered_json p = std::move(result.ordered);
  if (!result.errors.empty()) {
    p["_errors"] = result.errors;
    for (const auto& e : result.errors) std::cerr << "pillar: " << e << "\n";
  }
  return p;
}

}  // namespace

int call_command(base::minion_config cfg, const call_options& o) {
  states::registry states;
  states::register_builtin_states(states);
  modules::registry functions;
  modules::register_builtin_modules(functions);
  state::register_state_module(functions);
  apply::register_state_functions(functions, states);
  // saltutil.refresh_pillar: the pillar was compiled for this run (by the
  // master, or here with --local), as fresh as a refresh would make it.
  auto already_fresh = [](std::string&) { return true; };
  // Salt's --local is file_client: local; a masterless minion's config
  // (master_type: disable) asks no master either. As salt-call does, the
  // options say so, for what asks opts (mine.get, config.get file_client).
  const bool local = o.local || cfg.file_client == "local" ||
                     cfg.master_type == base::master_mode::disabled;
  if (local) cfg.file_client = "local";
  minion::context ctx(cfg, functions, minion::context::hooks{nullptr, already_fresh});
  minion::master_call link(cfg);
  if (local) {
    ctx.set_pillar(local_pillar(cfg, *ctx.grains(), functions, ctx), true);
  } else {
    // The connection stays open for the call's salt:// files.
    auto got = link.fetch_pillar(*ctx.grains(), true);
    if (!got.pillar) {
      // salt-call exits 2 when it cannot authenticate with a master.
      std::cerr << "brine: " << minion::no_pillar_message(cfg, got) << "\n";
      return 2;
    }
    if (auto e = got.pillar->find("_errors"); e != got.pillar->end() && e->is_array()) {
      for (const auto& line : *e) {
        std::cerr << "pillar (master " << got.master
                  << "): " << (line.is_string() ? line.get<std::string>() : line.dump()) << "\n";
      }
    }
    ctx.set_master_tops(std::move(got.tops));
    ctx.set_pillar(std::move(*got.pillar));
    // salt:// is the master's file server, as for the daemon's jobs; the
    // copies go to the minion's cachedir, as salt-call's do.
    base::ensure_dir(cfg.cachedir, 0700, "cachedir");
    base::ensure_dir(cfg.cachedir + "/files", 0700, "cachedir");
    ctx.set_files(std::make_unique<fileserver::remote_client>(cfg.cachedir + "/files",
                                                              link.files()));
  }

  modules::call c;
  c.fun = o.fun;
  split_args(o.words, c.args, c.kwargs);
  c.jid = "local";
  c.timeout = std::chrono::seconds(cfg.job_timeout);
  c.context = &ctx;
  // On the link's io_context when a master connection is open (its reads
  // keep that one busy: run until the function is done, then close it).
  asio::io_context own_io;
  asio::io_context& io = link.io() != nullptr ? *link.io() : own_io;
  modules::outcome out;
  bool done = false;
  asio::co_spawn(io, modules::execute(functions, c), [&](std::exception_ptr e, modules::outcome r) {
    done = true;
    out = e ? modules::error_outcome("the function ended with an exception") : std::move(r);
  });
  io.restart();
  while (!done && io.run_one() > 0) {
  }
  link.stop();
  if (!done) throw base::error(o.fun + " did not finish");
  std::string format = o.out.empty() ? (is_state_function(o.fun) ? "highstate" : "nested") : o.out;
  if (format == "highstate") {
    highstate_options h;
    h.state_output = o.state_output.empty() ? ctx.opts().value("state_output", std::string("full"))
                                            : o.state_output;
    h.state_verbose = o.state_verbose ? *o.state_verbose
                                      : ctx.opts().value("state_verbose", true);
    h.color = !o.no_color && (o.force_color || ::isatty(STDOUT_FILENO));
    nlohmann::ordered_json data =
        out.ordered_ret ? *out.ordered_ret : nlohmann::ordered_json(out.ret);
    std::cout << highstate_out("local", data, h);
  } else if (format == "json" && out.ordered_ret) {
    // Salt's json outputter: its dicts' own key order, ASCII only.
    nlohmann::ordered_json doc = nlohmann::ordered_json::object();
    doc["local"] = *out.ordered_ret;
    std::cout << state::python_json_dump(doc, 4) << "\n";
  } else if (format == "json") {
    std::cout << json{{"local", out.ret}}.dump(4) << "\n";
  } else if (format == "yaml") {
    std::cout << yaml_out("local", out.ret);
  } else if (format == "raw") {
    std::cout << python_repr(json{{"local", out.ret}}) << "\n";
  } else if (format == "txt") {
    std::cout << txt_out("local", out.ret);
  } else {
    std::cout << nested("local", out.ret);
  }
  // salt-call's exit status: the function's retcode (1 for a failure
  // without one).
  if (!out.success) return out.retcode != 0 ? out.retcode : 1;
  return 0;
}

}  // namespace brine::cli
