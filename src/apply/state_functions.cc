#include "apply/state_functions.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <ctime>

#include "apply/runner.h"
#include "base/error.h"
#include "base/python_truth.h"
#include "catalog/request.h"
#include "fileserver/pinned.h"
#include "modules/context.h"
#include "modules/data.h"
#include "state/bridge.h"
#include "state/high.h"
#include "state/highstate.h"
#include "state/state_mod.h"

namespace brine::apply {

namespace {

using modules::call;
using modules::outcome;

// Salt's exit codes: a state that failed, and a compile (or argument) error.
constexpr int k_state_failure = 2;
constexpr int k_compiler_error = 1;

// The functions that apply states, one run at a time per minion.
bool applies_states(const std::string& fun) {
  for (const char* f : {"state.apply", "state.highstate", "state.sls", "state.sls_id",
                        "state.single", "state.low", "state.test", "state.template",
                        "state.template_str", "state.top", "state.request"}) {
    if (fun == f) return true;
  }
  return false;
}

// A positional argument `i` or keyword `name`; null when neither.
json arg(const call& c, size_t i, const std::string& name) {
  if (c.kwargs.is_object()) {
    if (auto it = c.kwargs.find(name); it != c.kwargs.end()) return json::parse(it->dump());
  }
  if (c.args.is_array() && i < c.args.size()) return json(c.args[i]);
  return json();
}

// test=True per call, else the minion's `test` option (Salt's _get_test_value).
bool test_mode(const call& c, modules::minion_context& ctx) {
  if (c.kwargs.is_object() && c.kwargs.contains("test") && !c.kwargs["test"].is_null()) {
    return base::python_truth(c.kwargs["test"]);
  }
  return base::python_truth(ctx.opts().value("test", nlohmann::json(false)));
}

std::optional<std::string> mods_of(const json& v) {
  if (v.is_null()) return std::nullopt;
  if (v.is_string()) return v.get<std::string>();
  if (v.is_array()) {
    std::string joined;
    for (const auto& e : v) {
      if (!joined.empty()) joined += ",";
      joined += e.is_string() ? e.get<std::string>() : e.dump();
    }
    return joined;
  }
  return v.dump();
}

// Salt's jid_to_time: "2026, Nov 27 00:54:21.123456".
std::string jid_time(const std::string& jid) {
  static const char* months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                 "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  if (jid.size() != 20) return jid;
  int month = std::atoi(jid.substr(4, 2).c_str());
  if (month < 1 || month > 12) return jid;
  return jid.substr(0, 4) + ", " + months[month - 1] + " " + jid.substr(6, 2) + " " +
         jid.substr(8, 2) + ":" + jid.substr(10, 2) + ":" + jid.substr(12, 2) + "." +
         jid.substr(14, 6);
}

// Salt's _prior_running_states: the other state runs of this minion, as
// Salt's conflict messages.
json other_runs(const call& c, modules::minion_context& ctx) {
  json out = json::array();
  for (const auto& j : ctx.running()) {
    if (j.jid == c.jid || !applies_states(j.fun)) continue;
    out.push_back("The function \"" + j.fun + "\" is running as PID " +
                  std::to_string(::getpid()) + " and was started at " + jid_time(j.jid) +
                  " with jid " + j.jid);
  }
  return out;
}

outcome finish(json ret, int retcode) {
  outcome o;
  o.ret = nlohmann::json(ret);
  o.ordered_ret = std::make_shared<const json>(std::move(ret));
  o.retcode = retcode;
  o.success = retcode == 0;
  return o;
}

// Waits (queue=True) or refuses (Salt's conflict, retcode 1) while another
// state run is going on; nullopt when this one may go ahead.
asio::awaitable<std::optional<outcome>> wait_for_turn(const call& c, modules::minion_context& ctx) {
  bool queue = base::python_truth(c.kwargs.value("queue", nlohmann::json(false)));
  while (true) {
    json others = other_runs(c, ctx);
    if (others.empty()) co_return std::nullopt;
    if (!queue) co_return finish(std::move(others), k_compiler_error);
    asio::steady_timer t(co_await asio::this_coro::executor, std::chrono::milliseconds(100));
    co_await t.async_wait(asio::use_awaitable);
  }
}

// The pillar a run compiles with: inline pillar= merged over the minion's
// (Salt's pillar_override).
std::shared_ptr<const nlohmann::ordered_json> pillar_for(const call& c,
                                                         modules::minion_context& ctx) {
  auto base = ctx.ordered_pillar();
  if (!c.kwargs.is_object() || !c.kwargs.contains("pillar")) return base;
  const auto& over = c.kwargs["pillar"];
  if (over.is_null()) return base;
  if (!over.is_object()) {
    throw base::error(
        "Pillar data must be formatted as a dictionary, unless pillar_enc is specified.");
  }
  nlohmann::json merged = nlohmann::json::parse(base->dump());
  modules::dict_update(merged, over);
  // Keep the minion's key order, new keys after.
  auto out = std::make_shared<nlohmann::ordered_json>(*base);
  for (auto& [k, v] : merged.items()) (*out)[k] = nlohmann::ordered_json(v);
  return out;
}

// The minion as a run's states see it: its pillar with the run's inline
// pillar= merged in (Salt's pillar_override reaches __pillar__, so
// pillar.get from test.check_pillar or module.run sees it), and its files
// as one listing of the master's for the whole run (fileserver/pinned.h);
// the rest the minion's own. Lives as long as the run.
class run_context : public modules::minion_context {
 public:
  run_context(modules::minion_context& inner, std::shared_ptr<const nlohmann::ordered_json> pillar)
      : inner_(inner),
        ordered_(std::move(pillar)),
        plain_(std::make_shared<const nlohmann::json>(nlohmann::json::parse(ordered_->dump()))),
        files_(inner.files()) {}
  const std::string& id() const override { return inner_.id(); }
  std::shared_ptr<const nlohmann::json> grains() const override { return inner_.grains(); }
  std::shared_ptr<const nlohmann::json> pillar() const override { return plain_; }
  std::shared_ptr<const nlohmann::ordered_json> ordered_pillar() const override { return ordered_; }
  bool pillar_compiled_here() const override { return inner_.pillar_compiled_here(); }
  std::shared_ptr<const nlohmann::json> master_tops() const override {
    return inner_.master_tops();
  }
  const nlohmann::json& opts() const override { return inner_.opts(); }
  std::string grains_file() const override { return inner_.grains_file(); }
  const modules::registry& functions() const override { return inner_.functions(); }
  fileserver::client& files() override { return files_; }
  void refresh_grains() override { inner_.refresh_grains(); }
  bool refresh_pillar(std::string& why) override { return inner_.refresh_pillar(why); }
  asio::awaitable<std::shared_ptr<const nlohmann::json>> fresh_pillar() override {
    co_return plain_;
  }
  std::vector<modules::running_job> running() const override { return inner_.running(); }
  bool kill_job(const std::string& jid) override { return inner_.kill_job(jid); }
  asio::awaitable<std::optional<nlohmann::json>> compile_on_master(
      nlohmann::json request) override {
    co_return co_await inner_.compile_on_master(std::move(request));
  }
  // The files a compile master's catalog names, at the hashes it sent.
  void seed_files(const std::vector<catalog::file_ref>& refs) {
    std::map<std::string, std::vector<fileserver::entry>> by_env;
    for (const auto& r : refs) by_env[r.saltenv].push_back({r.path, r.hash, r.size, r.mode});
    for (auto& [env, entries] : by_env) files_.seed(env, std::move(entries));
  }

 private:
  modules::minion_context& inner_;
  std::shared_ptr<const nlohmann::ordered_json> ordered_;
  std::shared_ptr<const nlohmann::json> plain_;
  fileserver::pinned_client files_;
};

struct compiled {
  state::compiler::run_plan plan;
  std::string error;  // an exception from the compile
  // The compiler, kept for the run's templates (one __salt__, __grains__
  // and __pillar__ for the whole run, as in Salt).
  std::shared_ptr<state::compiler> compiler;
};

asio::awaitable<compiled> compile(const call& c, modules::minion_context& ctx,
                                  std::optional<std::string> mods, json exclude) {
  auto pillar = pillar_for(c, ctx);
  auto result = std::make_shared<compiled>();
  std::optional<state::roots_list> tree;
  try {
    tree = co_await state::state_tree(ctx);
  } catch (const std::exception& e) {
    result->error = e.what();
    co_return std::move(*result);
  }
  modules::minion_context* cp = &ctx;
  std::optional<std::string> saltenv = mods_of(arg(c, 99, "saltenv"));
  std::function<outcome()> work = [result, cp, mods, saltenv, exclude, pillar, tree]() {
    try {
      state::options o = state::options::from_opts(cp->opts());
      if (tree) o.file_roots = *tree;
      if (saltenv) o.saltenv = saltenv;
      state::minion m = state::minion_of(*cp);
      m.pillar = *pillar;
      auto comp = std::make_shared<state::compiler>(o, std::move(m));
      comp->set_salt(state::make_salt(*comp, cp->functions(), cp));
      result->plan = comp->plan(mods, saltenv, exclude);
      result->compiler = std::move(comp);
    } catch (const std::exception& e) {
      result->error = e.what();
    }
    return outcome{};
  };
  co_await state::on_pool(std::move(work));
  co_return std::move(*result);
}

// Salt's call_highstate answer when the top files give this minion nothing.
json no_top() {
  json r = json::object();
  r["result"] = false;
  r["comment"] =
      "No Top file or master_tops data matches found. Please see master log for details.";
  r["name"] = "No States";
  r["changes"] = json::object();
  r["__run_num__"] = 0;
  json out = json::object();
  out["no_|-states_|-states_|-None"] = std::move(r);
  return out;
}

// Compile masters: the run's catalog from a master that compiles for this
// minion, compiled from exactly what a compile here would read (its grains,
// the run's pillar, its options, the master's files); nullopt: compile here
// (no such master, none answered, or it answered that this run compiles on
// the minion).
asio::awaitable<std::optional<catalog::reply>> master_catalog(const call& c, run_context& ctx,
                                                              std::optional<std::string> mods,
                                                              const json& exclude) {
  catalog::request r;
  r.fun = c.fun;
  r.mods = std::move(mods);
  r.saltenv = mods_of(arg(c, 99, "saltenv"));
  r.exclude = nlohmann::json(exclude);
  r.grains = *ctx.grains();
  r.pillar = *ctx.ordered_pillar();
  r.pillar_compiled_here = ctx.pillar_compiled_here();
  r.opts = ctx.opts();
  r.master_tops = *ctx.master_tops();
  r.jid = c.jid;
  auto body = co_await ctx.compile_on_master(catalog::to_body(r));
  if (!body) co_return std::nullopt;
  std::string why;
  auto reply = catalog::reply_from_body(*body, why);
  if (!reply) {
    spdlog::warn("minion {}: job {}: the master's compile_reply is malformed ({}); compiling here",
                 ctx.id(), c.jid, why);
    co_return std::nullopt;
  }
  if (reply->what == catalog::reply::kind::minion) {
    spdlog::debug("minion {}: job {}: compiling here: {}", ctx.id(), c.jid, reply->reason);
    co_return std::nullopt;
  }
  spdlog::debug("minion {}: job {}: catalog compiled by the master{}", ctx.id(), c.jid,
                reply->cached ? " (from its cache)" : "");
  co_return reply;
}

// A master's catalog as the run's: its files seeded, the state tree
// brought here only when a template will render (file.managed's includes
// and imports read it), as a compile here would have.
asio::awaitable<std::optional<outcome>> take_catalog(catalog::reply& cat, run_context& ctx) {
  if (cat.what == catalog::reply::kind::errors) {
    co_return finish(json(cat.errors), k_compiler_error);
  }
  if (cat.what == catalog::reply::kind::no_top) co_return finish(no_top(), k_state_failure);
  ctx.seed_files(cat.files);
  bool templates = false;
  for (const auto& chunk : cat.chunks) {
    if (auto t = chunk.find("template"); t != chunk.end() && !t->is_null()) templates = true;
  }
  if (templates) {
    try {
      co_await state::state_tree(ctx);
    } catch (const std::exception& e) {
      co_return finish(json::array({e.what()}), k_compiler_error);
    }
  }
  co_return std::nullopt;
}

settings settings_for(const call& c, modules::minion_context& ctx, const states::registry& st,
                      std::shared_ptr<state::compiler> compiler = nullptr) {
  settings s;
  s.compiler = std::move(compiler);
  s.states = &st;
  s.functions = &ctx.functions();
  s.context = &ctx;
  s.test = test_mode(c, ctx);
  s.failhard = base::python_truth(ctx.opts().value("failhard", nlohmann::json(false)));
  s.jid = c.jid;
  s.timeout = c.timeout;
  return s;
}

// state.apply / highstate / sls / test: compile, then run every chunk.
asio::awaitable<outcome> apply_states(call c, const states::registry* st,
                                      std::optional<std::string> mods, bool force_test) {
  modules::minion_context& ctx = modules::need_context(c);
  if (auto refused = co_await wait_for_turn(c, ctx)) co_return std::move(*refused);
  if (force_test) c.kwargs["test"] = true;
  // The run's context (with pillar=) from the compile on: the templates
  // of the sls files and those of file.managed see the same minion.
  run_context run_ctx(ctx, pillar_for(c, ctx));
  json exclude = arg(c, 99, "exclude");
  if (auto cat = co_await master_catalog(c, run_ctx, mods, exclude)) {
    if (auto done = co_await take_catalog(*cat, run_ctx)) co_return std::move(*done);
    runner r(settings_for(c, run_ctx, *st));
    json ret = co_await r.run(std::move(cat->chunks));
    int rc = any_failed(ret) ? k_state_failure : 0;
    co_return finish(std::move(ret), rc);
  }
  compiled comp = co_await compile(c, run_ctx, mods, exclude);
  if (!comp.error.empty()) co_return finish(json::array({comp.error}), k_compiler_error);
  if (!comp.plan.errors.is_null()) co_return finish(comp.plan.errors, k_compiler_error);
  if (comp.plan.no_top) co_return finish(no_top(), k_state_failure);
  runner r(settings_for(c, run_ctx, *st, std::move(comp.compiler)));
  json ret = co_await r.run(std::move(comp.plan.chunks));
  int rc = any_failed(ret) ? k_state_failure : 0;
  co_return finish(std::move(ret), rc);
}

asio::awaitable<outcome> apply(call c, const states::registry* st) {
  // state.apply with mods is state.sls; without, the highstate.
  std::optional<std::string> mods = mods_of(arg(c, 0, "mods"));
  if (mods && mods->empty()) mods.reset();
  co_return co_await apply_states(std::move(c), st, mods, false);
}

asio::awaitable<outcome> sls(call c, const states::registry* st) {
  std::optional<std::string> mods = mods_of(arg(c, 0, "mods"));
  if (!mods || mods->empty()) co_return finish(json::array({"No mods given"}), k_compiler_error);
  co_return co_await apply_states(std::move(c), st, mods, false);
}

asio::awaitable<outcome> highstate(call c, const states::registry* st) {
  co_return co_await apply_states(std::move(c), st, std::nullopt, false);
}

asio::awaitable<outcome> test(call c, const states::registry* st) {
  std::optional<std::string> mods = mods_of(arg(c, 0, "mods"));
  if (mods && mods->empty()) mods.reset();
  co_return co_await apply_states(std::move(c), st, mods, true);
}

// state.sls_id ID MODS: the chunks of ID in MODS (and their requisites).
asio::awaitable<outcome> sls_id(call c, const states::registry* st) {
  modules::minion_context& ctx = modules::need_context(c);
  json id = arg(c, 0, "id");
  std::optional<std::string> mods = mods_of(arg(c, 1, "mods"));
  if (id.is_null() || !mods) {
    co_return finish(json::array({"state.sls_id needs an ID and the sls files (mods)"}),
                     k_compiler_error);
  }
  if (auto refused = co_await wait_for_turn(c, ctx)) co_return std::move(*refused);
  run_context run_ctx(ctx, pillar_for(c, ctx));
  std::string want = id.is_string() ? id.get<std::string>() : state::py_str(id);
  json ret;
  if (auto cat = co_await master_catalog(c, run_ctx, mods, json())) {
    if (auto done = co_await take_catalog(*cat, run_ctx)) co_return std::move(*done);
    // no_top cannot come of an sls compile.
    runner r(settings_for(c, run_ctx, *st));
    ret = co_await r.run_id(std::move(cat->chunks), want);
  } else {
    compiled comp = co_await compile(c, run_ctx, mods, json());
    if (!comp.error.empty()) co_return finish(json::array({comp.error}), k_compiler_error);
    if (!comp.plan.errors.is_null()) co_return finish(comp.plan.errors, k_compiler_error);
    runner r(settings_for(c, run_ctx, *st, std::move(comp.compiler)));
    ret = co_await r.run_id(std::move(comp.plan.chunks), want);
  }
  if (ret.empty()) {
    std::string env = mods_of(arg(c, 99, "saltenv")).value_or("base");
    co_return finish(json::array({"No matches for ID '" + want + "' found in SLS '" + *mods +
                                  "' within saltenv '" + env + "'"}),
                     k_compiler_error);
  }
  co_return finish(ret, any_failed(ret) ? k_state_failure : 0);
}

// state.single FUN name=NAME [args]: one state, no sls.
asio::awaitable<outcome> single(call c, const states::registry* st) {
  modules::minion_context& ctx = modules::need_context(c);
  json fun = arg(c, 0, "fun");
  json name = arg(c, 1, "name");
  if (!fun.is_string() || fun.get<std::string>().find('.') == std::string::npos) {
    co_return finish(json::array({"Invalid function passed"}), k_compiler_error);
  }
  if (auto refused = co_await wait_for_turn(c, ctx)) co_return std::move(*refused);
  std::string f = fun.get<std::string>();
  json low = json::object();
  for (const auto& [k, v] : c.kwargs.items()) {
    if (k.starts_with("__") || k == "test" || k == "queue" || k == "pillar" || k == "fun") continue;
    low[k] = json(v);
  }
  low["state"] = f.substr(0, f.find('.'));
  low["fun"] = f.substr(f.find('.') + 1);
  low["__id__"] = name;
  low["name"] = name;
  runner r(settings_for(c, ctx, *st));
  json ret = co_await r.run_single(std::move(low));
  if (ret.is_array()) co_return finish(std::move(ret), k_compiler_error);
  co_return finish(ret, any_failed(ret) ? k_state_failure : 0);
}

// state.low '{"state": ..., "fun": ..., "name": ...}': one low chunk.
asio::awaitable<outcome> low(call c, const states::registry* st) {
  modules::minion_context& ctx = modules::need_context(c);
  json data = arg(c, 0, "data");
  if (!data.is_object()) co_return finish(json::array({"state.low needs a low chunk (a map)"}), 1);
  if (auto refused = co_await wait_for_turn(c, ctx)) co_return std::move(*refused);
  if (!data.contains("__id__") && data.contains("name")) data["__id__"] = data["name"];
  runner r(settings_for(c, ctx, *st));
  json ret = co_await r.run_single(std::move(data));
  if (ret.is_array()) co_return finish(std::move(ret), k_compiler_error);
  // state.low answers with the state's own return, not keyed by its tag.
  json only = ret.empty() ? json::object() : ret.begin().value();
  co_return finish(only, any_failed(ret) ? k_state_failure : 0);
}

asio::awaitable<outcome> running(call c) {
  modules::minion_context& ctx = modules::need_context(c);
  co_return finish(other_runs(c, ctx), 0);
}

}  // namespace

void register_state_functions(modules::registry& reg, const states::registry& states) {
  const states::registry* st = &states;
  reg.add(
      "state.apply", [st](call c) { return apply(std::move(c), st); },
      "state.apply [MODS] [test=True] [pillar={...}] [saltenv=base] [exclude=...] [queue=False]: "
      "applies the highstate, or the sls files MODS (comma-separated), and returns each "
      "state's result\n\nCLI example: brine cmd '*' state.apply webserver test=True");
  reg.add(
      "state.highstate", [st](call c) { return highstate(std::move(c), st); },
      "state.highstate [test=True] [pillar={...}] [exclude=...] [queue=False]: applies what the "
      "top files give this minion\n\nCLI example: brine cmd '*' state.highstate");
  reg.add(
      "state.sls", [st](call c) { return sls(std::move(c), st); },
      "state.sls MODS [test=True] [pillar={...}] [saltenv=base] [exclude=...] [queue=False]: "
      "applies the sls files MODS (comma-separated)\n\nCLI example: brine cmd '*' state.sls "
      "nginx,php");
  reg.add(
      "state.test", [st](call c) { return test(std::move(c), st); },
      "state.test [MODS]: state.apply with test=True: what would change, changing nothing\n\n"
      "CLI example: brine cmd '*' state.test");
  reg.add(
      "state.sls_id", [st](call c) { return sls_id(std::move(c), st); },
      "state.sls_id ID MODS [test=True]: applies the state ID of the sls files MODS, with its "
      "requisites\n\nCLI example: brine cmd '*' state.sls_id nginx_conf webserver");
  reg.add(
      "state.single", [st](call c) { return single(std::move(c), st); },
      "state.single FUN name=NAME [ARG=VALUE...]: applies one state function\n\nCLI example: "
      "brine cmd '*' state.single file.touch name=/tmp/x");
  reg.add(
      "state.low", [st](call c) { return low(std::move(c), st); },
      "state.low '{\"state\": \"test\", \"fun\": \"nop\", \"name\": \"x\"}': applies one low "
      "chunk\n\nCLI example: brine cmd '*' state.low '{state: test, fun: nop, name: x}'");
  reg.add("state.running", running,
          "state.running: the state runs going on on this minion, as Salt's conflict "
          "messages\n\nCLI example: brine cmd '*' state.running");
}

}  // namespace brine::apply
