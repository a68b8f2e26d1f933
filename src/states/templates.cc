#include "states/templates.h"

#include <functional>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "fileserver/client.h"
#include "modules/context.h"
#include "modules/registry.h"
#include "state/bridge.h"
#include "state/highstate.h"
#include "state/state_mod.h"

namespace brine::states {
namespace {

// A compiler for templates of `saltenv` when the run has none: the minion's
// options, with a master's files in the minion's cache.
std::shared_ptr<state::compiler> make_compiler(modules::minion_context* mc,
                                               const modules::registry* functions,
                                               const std::string& saltenv,
                                               const std::vector<std::string>& dirs) {
  state::options o = state::options::from_opts(mc->opts());
  if (mc->files().remote()) o.file_roots = {{saltenv, dirs}};
  auto comp = std::make_shared<state::compiler>(o, state::minion_of(*mc));
  comp->set_salt(state::make_salt(*comp, *functions, mc));
  return comp;
}

}  // namespace

asio::awaitable<rendered_template> render_template_file(state_call c, std::string local,
                                                        std::string saltenv, json context) {
  rendered_template out;
  if (c.context == nullptr || c.functions == nullptr) {
    out.error = "template: jinja needs a minion";
    co_return out;
  }
  std::string sls;
  if (const json* v = c.arg("__sls__"); v != nullptr && v->is_string()) sls = v->get<std::string>();
  modules::minion_context* mc = c.context;
  const modules::registry* functions = c.functions;
  std::vector<std::string> dirs = mc->files().dirs_of(saltenv);
  // The run outlives its states; a call outside one keeps its own.
  std::shared_ptr<run_data> keep;
  run_data* run = c.per_run;
  if (run == nullptr) {
    keep = std::make_shared<run_data>();
    run = keep.get();
  }
  auto result = std::make_shared<rendered_template>();
  std::function<modules::outcome()> work = [result, run, mc, functions, local, saltenv, sls,
                                            context, dirs]() {
    try {
      std::lock_guard lock(run->templates_mu);
      std::shared_ptr<state::compiler> comp = run->compiler;
      if (!comp) {
        auto& made = run->env_compilers[saltenv];
        if (!made) made = make_compiler(mc, functions, saltenv, dirs);
        comp = made;
      }
      result->text = comp->render_file(local, saltenv, sls, nlohmann::json(context));
    } catch (const std::exception& e) {
      result->error = e.what();
    }
    return modules::outcome{};
  };
  co_await state::on_pool(std::move(work));
  out = std::move(*result);
  co_return out;
}

}  // namespace brine::states
