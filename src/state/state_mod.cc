#include "state/state_mod.h"

#include <asio/async_result.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/post.hpp>
#include <asio/thread_pool.hpp>
#include <asio/use_awaitable.hpp>
#include <functional>
#include <memory>

#include "base/error.h"
#include "base/on_pool.h"
#include "fileserver/client.h"
#include "modules/context.h"
#include "modules/data.h"
#include "state/bridge.h"
#include "state/highstate.h"

namespace brine::state {

using modules::call;
using modules::outcome;

namespace {

// Compilation blocks (files, templates, salt[...] calls run to completion
// on the compiling thread), so it runs here and the caller's executor
// stays free. Two threads: two compiles at once, no more.
asio::thread_pool& compile_pool() {
  static asio::thread_pool pool(2);
  return pool;
}

}  // namespace

asio::awaitable<outcome> on_pool(std::function<outcome()> work) {
  return base::on_pool<outcome>(compile_pool(), std::move(work));
}

asio::awaitable<std::optional<roots_list>> state_tree(modules::minion_context& ctx) {
  fileserver::client& files = ctx.files();
  if (!files.remote()) co_return std::nullopt;
  roots_list roots;
  auto envs = co_await files.envs();
  for (auto& env : envs) {
    auto dirs = co_await files.tree(env);
    roots.emplace_back(std::move(env), std::move(dirs));
  }
  co_return roots;
}

minion minion_of(modules::minion_context& ctx) {
  minion m;
  m.id = ctx.id();
  m.grains = json(*ctx.grains());
  m.pillar = *ctx.ordered_pillar();  // Salt's key order: templates iterate it
  m.pillar_ordered_dicts = ctx.pillar_compiled_here();
  m.opts = json(ctx.opts());
  m.master_tops = *ctx.master_tops();
  return m;
}

namespace {

outcome to_outcome(result r) {
  outcome o;
  o.ret = nlohmann::json(r.ret);
  o.ordered_ret = std::make_shared<const json>(std::move(r.ret));
  o.retcode = r.retcode;
  o.success = r.retcode == 0;
  return o;
}

// The positional argument `i` or keyword `name` as text.
std::optional<std::string> text_arg(const call& c, size_t i, const std::string& name) {
  const nlohmann::json* v = nullptr;
  if (c.args.is_array() && i < c.args.size()) v = &c.args[i];
  if (!v && c.kwargs.is_object()) {
    if (auto it = c.kwargs.find(name); it != c.kwargs.end()) v = &*it;
  }
  if (!v || v->is_null()) return std::nullopt;
  if (v->is_string()) return v->get<std::string>();
  if (v->is_array()) {
    std::string joined;
    for (const auto& e : *v) {
      if (!joined.empty()) joined += ",";
      joined += e.is_string() ? e.get<std::string>() : e.dump();
    }
    return joined;
  }
  return v->dump();
}

using show_fn = std::function<result(compiler&, const call&)>;

asio::awaitable<outcome> show(call c, show_fn fn) {
  modules::minion_context* ctx = &modules::need_context(c);
  std::optional<roots_list> tree;
  try {
    tree = co_await state_tree(*ctx);
  } catch (const std::exception& e) {
    co_return modules::error_outcome(e.what());
  }
  // A named closure, not a temporary inside the co_await expression: GCC 12
  // copies such temporaries into the coroutine frame bitwise (their
  // strings then point into the frame after it is gone).
  std::function<outcome()> work = [c, fn, ctx, tree]() {
    try {
      options o = options::from_opts(ctx->opts());
      if (tree) o.file_roots = *tree;
      if (auto env = text_arg(c, 99, "saltenv")) o.saltenv = env;
      auto comp = std::make_unique<compiler>(o, minion_of(*ctx));
      comp->set_salt(make_salt(*comp, ctx->functions(), ctx));
      return to_outcome(fn(*comp, c));
    } catch (const std::exception& e) {
      return modules::error_outcome(e.what());
    }
  };
  outcome r = co_await on_pool(std::move(work));
  co_return r;
}

std::string need_mods(const call& c) {
  auto mods = text_arg(c, 0, "mods");
  if (!mods) throw base::error(c.fun + ": missing argument 'mods'");
  return *mods;
}

}  // namespace

void register_state_module(modules::registry& reg) {
  reg.add(
      "state.show_top",
      [](call c) { return show(std::move(c), [](compiler& x, const call&) { return x.show_top(); }); },
      "state.show_top: the sls files the top files give this minion, per environment (Salt's "
      "state.show_top)");
  reg.add(
      "state.show_highstate",
      [](call c) {
        return show(std::move(c), [](compiler& x, const call&) { return x.show_highstate(); });
      },
      "state.show_highstate: the high data of this minion's highstate, or the compiler's errors");
  reg.add(
      "state.show_lowstate",
      [](call c) {
        return show(std::move(c), [](compiler& x, const call&) { return x.show_lowstate(); });
      },
      "state.show_lowstate: the ordered low chunks of this minion's highstate, or the "
      "compiler's errors");
  reg.add(
      "state.show_sls",
      [](call c) {
        return show(std::move(c), [](compiler& x, const call& c) {
          return x.show_sls(need_mods(c), text_arg(c, 99, "saltenv"));
        });
      },
      "state.show_sls MODS [saltenv=base]: the high data of sls files (comma-separated), or the "
      "compiler's errors");
  reg.add(
      "state.show_low_sls",
      [](call c) {
        return show(std::move(c), [](compiler& x, const call& c) {
          return x.show_low_sls(need_mods(c), text_arg(c, 99, "saltenv"));
        });
      },
      "state.show_low_sls MODS [saltenv=base]: the low chunks of sls files (comma-separated), "
      "or the compiler's errors");
  reg.add(
      "state.sls_exists",
      [](call c) {
        return show(std::move(c), [](compiler& x, const call& c) {
          auto r = x.show_sls(need_mods(c), text_arg(c, 99, "saltenv"));
          return result{json(r.ret.is_object()), 0};
        });
      },
      "state.sls_exists MODS [saltenv=base]: whether the sls files render without errors");
  reg.add(
      "slsutil.renderer",
      [](call c) {
        return show(std::move(c), [](compiler& x, const call& c) {
          auto path = text_arg(c, 0, "path");
          if (!path) throw base::error("slsutil.renderer: missing argument 'path'");
          std::string def = text_arg(c, 2, "default_renderer").value_or("jinja|yaml");
          json kwargs = json::object();
          for (const auto& [k, v] : c.kwargs.items()) {
            if (k == "path" || k == "default_renderer" || k == "string" || k.starts_with("__")) {
              continue;
            }
            kwargs[k] = json(v);
          }
          return x.renderer(*path, def, kwargs);
        });
      },
      "slsutil.renderer PATH [default_renderer=jinja|yaml] [key=value...]: the data a file "
      "renders to through its renderer pipe (Salt's slsutil.renderer)");
}

}  // namespace brine::state
