// brine call: runs one execution function on this host with the minion's
// identity, grains and pillar, as salt-call does. --local is masterless: the
// pillar is compiled here from the minion config's pillar_roots. Without it,
// the pillar is the one the minion's master compiled, as the minion daemon
// last received and kept it in its cachedir.

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/fs.h"
#include "cli/commands.h"
#include "cli/output.h"
#include "minion/context.h"
#include "modules/registry.h"
#include "pillar/pillar.h"

namespace brine::cli {

using nlohmann::json;

namespace {

json local_pillar(const base::minion_config& cfg, const json& grains) {
  pillar::options o;
  o.roots = cfg.pillar_roots;
  auto compiler = pillar::compiler::load(o);
  auto result = compiler.compile(cfg.id, &grains);
  json p = std::move(result.pillar);
  if (!result.errors.empty()) {
    p["_errors"] = result.errors;
    for (const auto& e : result.errors) std::cerr << "pillar: " << e << "\n";
  }
  return p;
}

json cached_pillar(const base::minion_config& cfg) {
  std::string path = minion::pillar_cache_path(cfg);
  if (!base::file_exists(path)) {
    throw base::error("no pillar from a master at " + path +
                      ": the minion daemon keeps the pillar its master compiled there once it "
                      "has connected; start it ('brine minion -c " +
                      cfg.source + "'), or run masterless with --local");
  }
  std::ifstream in(path);
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    throw base::error("the cached pillar " + path + " is unreadable (" + e.what() +
                      "); run saltutil.refresh_pillar on the minion, or use --local");
  }
}

}  // namespace

int call_command(const base::minion_config& cfg, const call_options& o) {
  modules::registry functions;
  modules::register_builtin_modules(functions);
  minion::context ctx(cfg, functions,
                      minion::context::hooks{
                          nullptr,
                          [&](std::string& why) {
                            // Masterless: compile again from pillar_roots.
                            if (!o.local) {
                              why = "brine call reads the pillar the minion daemon keeps; "
                                    "refresh it through the daemon, or use --local";
                              return false;
                            }
                            return true;
                          }});
  ctx.set_pillar(o.local ? local_pillar(cfg, *ctx.grains()) : cached_pillar(cfg));

  modules::call c;
  c.fun = o.fun;
  split_args(o.words, c.args, c.kwargs);
  c.jid = "local";
  c.timeout = std::chrono::seconds(cfg.job_timeout);
  c.context = &ctx;
  asio::io_context io;
  modules::outcome out;
  bool done = false;
  asio::co_spawn(io, modules::execute(functions, c), [&](std::exception_ptr e, modules::outcome r) {
    done = true;
    out = e ? modules::error_outcome("the function ended with an exception") : std::move(r);
  });
  io.run();
  if (!done) throw base::error(o.fun + " did not finish");
  if (o.out == "json") {
    std::cout << json{{"local", out.ret}}.dump(4) << "\n";
  } else if (o.out == "yaml") {
    std::cout << yaml_out("local", out.ret);
  } else if (o.out == "raw") {
    std::cout << python_repr(json{{"local", out.ret}}) << "\n";
  } else if (o.out == "txt") {
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
