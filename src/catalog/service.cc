#include "catalog/service.h"

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <chrono>
#include <exception>
#include <thread>

#include "base/error.h"
#include "base/run_here.h"
#include "fileserver/serve.h"
#include "modules/context.h"
#include "state/bridge.h"
#include "state/highstate.h"
#include "state/state_mod.h"

namespace brine::catalog {

namespace {

// The minion as a compile on the master sees it: what the request carried,
// the master's tree for salt://, nothing of the minion's machine. Records
// the first function a template called that must run on the minion.
class compile_context : public modules::minion_context {
 public:
  compile_context(std::string id, const request& r, fileserver::client& files,
                  const modules::registry& functions)
      : id_(std::move(id)),
        grains_(std::make_shared<const nlohmann::json>(r.grains)),
        ordered_(std::make_shared<const nlohmann::ordered_json>(r.pillar)),
        plain_(std::make_shared<const nlohmann::json>(nlohmann::json(r.pillar))),
        opts_(r.opts),
        here_(r.pillar_compiled_here),
        files_(files),
        functions_(functions) {}

  const std::string& id() const override { return id_; }
  std::shared_ptr<const nlohmann::json> grains() const override { return grains_; }
  std::shared_ptr<const nlohmann::json> pillar() const override { return plain_; }
  std::shared_ptr<const nlohmann::ordered_json> ordered_pillar() const override { return ordered_; }
  bool pillar_compiled_here() const override { return here_; }
  const nlohmann::json& opts() const override { return opts_; }
  std::string grains_file() const override { return {}; }
  const modules::registry& functions() const override { return functions_; }
  fileserver::client& files() override { return files_; }
  void refresh_grains() override {}
  bool refresh_pillar(std::string& why) override {
    why = "a compile on the master cannot refresh the minion's pillar";
    return false;
  }
  std::vector<modules::running_job> running() const override { return {}; }
  bool kill_job(const std::string&) override { return false; }

  void needs_minion(const std::string& fun) {
    std::lock_guard lock(mu_);
    if (needed_.empty()) needed_ = fun;
  }
  std::string needed() const {
    std::lock_guard lock(mu_);
    return needed_;
  }

 private:
  std::string id_;
  std::shared_ptr<const nlohmann::json> grains_;
  std::shared_ptr<const nlohmann::ordered_json> ordered_;
  std::shared_ptr<const nlohmann::json> plain_;
  nlohmann::json opts_;
  bool here_;
  fileserver::client& files_;
  const modules::registry& functions_;
  mutable std::mutex mu_;
  std::string needed_;
};

bool starts_with_any(const std::string& fun, std::initializer_list<const char*> prefixes) {
  for (const char* p : prefixes) {
    if (fun.starts_with(p)) return true;
  }
  return false;
}

}  // namespace

bool runs_on_master(const std::string& fun) {
  if (starts_with_any(fun,
                      {"pillar.", "config.", "defaults.", "slsutil.", "match.", "hashutil."})) {
    return true;
  }
  for (const char* f : {"grains.get", "grains.item", "grains.items", "grains.ls",
                        "grains.filter_by", "grains.equals", "grains.fetch", "grains.has_value"}) {
    if (fun == f) return true;
  }
  // test's data functions; not its sleeps nor its random values (a cached
  // catalog would repeat them).
  return fun.starts_with("test.") && fun.find("sleep") == std::string::npos &&
         fun.find("rand") == std::string::npos;
}

service::service(settings s, fileserver::backend& files)
    : settings_(std::move(s)),
      files_(files),
      tree_cache_(std::make_shared<fileserver::file_cache>(settings_.tree_dir)),
      tree_client_(tree_cache_,
                   [this](nlohmann::json request) -> asio::awaitable<nlohmann::json> {
                     co_return fileserver::serve(files_, request, settings_.max_reply_bytes);
                   }),
      cache_(settings_.cache_max_bytes) {
  modules::registry all;
  modules::register_builtin_modules(all);
  state::register_state_module(all);
  for (const auto& name : all.names()) {
    if (runs_on_master(name)) {
      functions_.add(name, *all.find(name), all.doc(name),
                     all.instant(name) ? modules::registry::kind::instant
                                       : modules::registry::kind::may_block);
      continue;
    }
    functions_.add(
        name,
        [](modules::call c) -> asio::awaitable<modules::outcome> {
          if (auto* ctx = dynamic_cast<compile_context*>(c.context)) ctx->needs_minion(c.fun);
          co_return modules::error_outcome(c.fun + " runs on the minion, not on a compile master");
        },
        all.doc(name));
  }
  unsigned threads = settings_.threads;
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  pool_ = std::make_unique<asio::thread_pool>(threads);
}

service::~service() { pool_->join(); }

std::map<std::string, std::string> service::revisions() {
  std::map<std::string, std::string> out;
  for (const auto& env : files_.envs()) {
    auto m = files_.list(env);
    out[env] = m ? m->revision : std::string();
  }
  return out;
}

std::vector<std::pair<std::string, std::vector<std::string>>> service::tree_at(
    const std::map<std::string, std::string>& revs, std::shared_lock<std::shared_mutex>& lock) {
  lock = std::shared_lock(tree_mu_);
  {
    std::lock_guard g(synced_mu_);
    if (synced_ == revs) return roots_;
  }
  lock.unlock();
  {
    std::unique_lock writer(tree_mu_);
    bool current = false;
    {
      std::lock_guard g(synced_mu_);
      current = synced_ == revs;
    }
    if (!current) {
      std::vector<std::pair<std::string, std::vector<std::string>>> roots;
      auto envs = base::run_here<std::vector<std::string>>([this] { return tree_client_.envs(); });
      for (auto& env : envs) {
        auto dirs =
            base::run_here<std::vector<std::string>>([this, &env] { return tree_client_.tree(env); });
        roots.emplace_back(std::move(env), std::move(dirs));
      }
      std::lock_guard g(synced_mu_);
      roots_ = std::move(roots);
      synced_ = revs;
    }
  }
  lock = std::shared_lock(tree_mu_);
  std::lock_guard g(synced_mu_);
  return roots_;
}

std::vector<file_ref> service::refs_of(const ordered_json& chunks) {
  std::vector<file_ref> out;
  std::map<std::string, std::shared_ptr<const fileserver::manifest>> listed;
  for (const auto& [env, path] : files_named(chunks)) {
    auto& m = listed[env];
    if (!m) m = files_.list(env);
    const fileserver::entry* e = m ? m->find(path) : nullptr;
    if (e == nullptr) continue;  // the state says it is missing, as on the minion
    out.push_back({env, path, e->hash, e->size, e->mode});
  }
  return out;
}

reply service::compile_miss(
    const std::string& minion, const request& r,
    const std::vector<std::pair<std::string, std::vector<std::string>>>& roots) {
  reply out;
  compile_context ctx(minion, r, tree_client_, functions_);
  state::compiler::run_plan plan;
  try {
    state::options o = state::options::from_opts(r.opts);
    o.file_roots = roots;
    if (r.saltenv) o.saltenv = r.saltenv;
    state::minion m;
    m.id = minion;
    m.grains = state::json(r.grains);
    m.pillar = r.pillar;
    m.pillar_ordered_dicts = r.pillar_compiled_here;
    m.opts = state::json(r.opts);
    m.master_tops = r.master_tops;
    state::compiler comp(o, std::move(m));
    comp.set_salt(state::make_salt(comp, functions_, &ctx));
    plan = comp.plan(r.mods, r.saltenv, state::json(r.exclude));
  } catch (const std::exception& e) {
    if (std::string fun = ctx.needed(); !fun.empty()) {
      out.what = reply::kind::minion;
      out.reason = "a template calls " + fun + ", which runs on the minion";
      return out;
    }
    out.what = reply::kind::errors;
    out.errors = json::array({e.what()});
    return out;
  }
  if (std::string fun = ctx.needed(); !fun.empty()) {
    out.what = reply::kind::minion;
    out.reason = "a template calls " + fun + ", which runs on the minion";
    return out;
  }
  if (!plan.errors.is_null()) {
    out.what = reply::kind::errors;
    out.errors = json(plan.errors);
    return out;
  }
  if (plan.no_top) {
    out.what = reply::kind::no_top;
    return out;
  }
  out.what = reply::kind::chunks;
  out.files = refs_of(plan.chunks);
  out.chunks = std::move(plan.chunks);
  return out;
}

service::answer service::compile_now(const std::string& minion, const request& r) {
  answer a;
  std::map<std::string, std::string> revs;
  try {
    revs = revisions();
  } catch (const std::exception& e) {
    reply out;
    out.what = reply::kind::errors;
    out.errors = json::array({std::string("the master cannot list its files: ") + e.what()});
    a.body = to_body(out);
    return a;
  }
  std::string key = key_of(r, revs);
  if (auto hit = cache_.get(key)) {
    a.body = json::from_msgpack(*hit);
    a.body["cached"] = true;
    a.hit = true;
    return a;
  }
  auto start = std::chrono::steady_clock::now();
  reply out;
  try {
    std::shared_lock<std::shared_mutex> lock;
    auto roots = tree_at(revs, lock);
    out = compile_miss(minion, r, roots);
  } catch (const std::exception& e) {
    // The master's own tree could not be brought up to date: not cached.
    out.what = reply::kind::errors;
    out.errors = json::array({std::string("the master cannot read its state tree: ") + e.what()});
    a.body = to_body(out);
    return a;
  }
  a.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  a.body = to_body(out);
  auto bytes = json::to_msgpack(a.body);
  cache_.put(minion, key, std::string(bytes.begin(), bytes.end()));
  return a;
}

void service::compile(std::string minion, request r, std::function<void(answer)> done) {
  in_flight_.fetch_add(1, std::memory_order_relaxed);
  asio::post(*pool_, [this, minion = std::move(minion), r = std::move(r),
                      done = std::move(done)]() mutable {
    answer a;
    try {
      a = compile_now(minion, r);
    } catch (const std::exception& e) {
      // Nothing a minion sends may take the master down: the run gets the
      // reason as a compile error.
      reply out;
      out.what = reply::kind::errors;
      out.errors = json::array({std::string("the master could not compile this run: ") + e.what()});
      a = answer{};
      a.body = to_body(out);
    }
    in_flight_.fetch_sub(1, std::memory_order_relaxed);
    done(std::move(a));
  });
}

}  // namespace brine::catalog
