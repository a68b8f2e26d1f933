#include "render/render.h"

#include "render/interpreter.h"

#include <list>
#include <mutex>
#include <unordered_map>

namespace brine::render {
namespace detail {
namespace {

struct tree_key {
  std::string_view name;
  std::string_view source;
  unsigned flags;
  bool operator==(const tree_key&) const = default;
};

struct tree_key_hash {
  std::size_t operator()(const tree_key& k) const {
    std::size_t h = std::hash<std::string_view>{}(k.source);
    h ^= std::hash<std::string_view>{}(k.name) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h ^ k.flags;
  }
};

// The sources the cache may hold, in bytes: a formula tree's templates
// fit many times over; a tree parsed is some tens of times its source.
constexpr std::size_t k_tree_cache_bytes = std::size_t{2} << 20;

class tree_cache {
 public:
  void clear() {
    std::lock_guard lock(mu_);
    index_.clear();
    lru_.clear();
    bytes_ = 0;
  }

  std::shared_ptr<const template_tree> find(const tree_key& k) {
    std::lock_guard lock(mu_);
    auto it = index_.find(k);
    if (it == index_.end()) return nullptr;
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->tree;
  }

  void insert(const std::string& source, const std::string& name, unsigned flags,
              std::shared_ptr<const template_tree> tree) {
    if (source.size() + name.size() > k_tree_cache_bytes) return;
    std::lock_guard lock(mu_);
    if (index_.contains(tree_key{name, source, flags})) return;
    lru_.push_front({name, source, flags, std::move(tree)});
    const entry& e = lru_.front();
    index_.emplace(tree_key{e.name, e.source, e.flags}, lru_.begin());
    bytes_ += e.name.size() + e.source.size();
    while (bytes_ > k_tree_cache_bytes) {
      const entry& old = lru_.back();
      bytes_ -= old.name.size() + old.source.size();
      index_.erase(tree_key{old.name, old.source, old.flags});
      lru_.pop_back();
    }
  }

 private:
  struct entry {
    std::string name;
    std::string source;
    unsigned flags;
    std::shared_ptr<const template_tree> tree;
  };
  std::mutex mu_;
  std::list<entry> lru_;  // most recently used first; the index's keys view its strings
  std::unordered_map<tree_key, std::list<entry>::iterator, tree_key_hash> index_;
  std::size_t bytes_ = 0;
};

}  // namespace

static tree_cache& tree_cache_instance() {
  static tree_cache cache;
  return cache;
}

std::shared_ptr<const template_tree> shared_template(const std::string& source,
                                                    const std::string& name,
                                                    const parse_options& opts) {
  tree_cache& cache = tree_cache_instance();
  // Every option is part of the key: one added to parse_options belongs here.
  static_assert(sizeof(parse_options) == 3);
  const unsigned flags = (opts.trim_blocks ? 1U : 0U) | (opts.lstrip_blocks ? 2U : 0U) |
                         (opts.keep_trailing_newline ? 4U : 0U);
  if (auto t = cache.find(tree_key{name, source, flags})) return t;
  auto t = parse_template(source, name, opts);
  cache.insert(source, name, flags, t);
  return t;
}

}  // namespace detail

void forget_parsed_templates() { detail::tree_cache_instance().clear(); }

std::string python_renderer_refusal(std::string_view renderer, const std::string& path) {
  if (renderer != "py" && renderer != "pyobjects" && renderer != "pydsl") return "";
  return "renderer '" + std::string(renderer) + "' (in " + path +
         ") runs Python code, which brine does not run: write the file as #!jinja|yaml "
         "(the data as YAML, the logic as Jinja, Python's calls as salt['module.function'](...))";
}

environment environment::salt() {
  environment env;
  env.salt_trailing_newline = true;
  return env;
}

std::string render(const std::string& source, const std::string& name, const context& ctx,
                   const environment& env) {
  detail::parse_options opts;
  opts.trim_blocks = env.trim_blocks;
  opts.lstrip_blocks = env.lstrip_blocks;
  opts.keep_trailing_newline = env.keep_trailing_newline;
  auto tree = detail::shared_template(source, name, opts);
  detail::render_state state{env, opts, {}, {}, {}, {}, {}, 0, 0};
  detail::interpreter in(ctx, env, name, &state);
  // Salt's tpldir global, else the template's own directory, is where its
  // relative names ('./x', '../x') start.
  std::string tpldir = ".";
  if (auto g = env.globals.find("tpldir"); g != env.globals.end() && g->second.is_string()) {
    tpldir = g->second.as_string();
  } else if (auto slash = name.rfind('/'); slash != std::string::npos && slash > 0) {
    tpldir = name.substr(0, slash);
  }
  std::string out;
  try {
    in.run(*tree, tpldir, out);
  } catch (const detail::located_error& e) {
    throw template_error(e.what());
  } catch (const template_error& e) {
    throw template_error("template '" + name + "': " + e.what());
  }
  if (env.salt_trailing_newline && !env.keep_trailing_newline) {
    if (source.ends_with("\n")) out += "\n";
  }
  return out;
}

std::string render_json(const std::string& source, const std::string& name,
                        const nlohmann::ordered_json& ctx, const environment& env) {
  if (!ctx.is_object() && !ctx.is_null())
    throw template_error("template '" + name + "': the context must be a JSON object");
  context c;
  if (ctx.is_object())
    for (const auto& [k, v] : ctx.items()) c[k] = value::from_json(v);
  return render(source, name, c, env);
}

}  // namespace brine::render
