#include "state/bridge.h"

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <exception>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>

#include "base/fs.h"
#include "modules/data.h"
#include "render/yaml.h"
#include "state/filters.h"

namespace brine::state {

namespace {

using render::call_args;
using render::value;

// Python's copy.deepcopy of template data.
value deepcopy(const value& v) {
  if (v.is_list() || v.is_tuple()) {
    std::vector<value> items;
    for (const auto& e : v.items()) items.push_back(deepcopy(e));
    return v.is_tuple() ? value::make_tuple(std::move(items)) : value::make_list(std::move(items));
  }
  if (v.is_dict() && !v.is_namespace()) {
    value d = value::make_dict();
    d.dict().ordered_dict = v.dict().ordered_dict;  // deepcopy keeps the type
    for (const auto& [k, e] : v.dict().entries) d.dict().set(k, deepcopy(e));
    return d;
  }
  return v;
}

bool list_has(const value& list, const value& x) {
  for (const auto& e : list.items()) {
    if (render::equal(e, x)) return true;
  }
  return false;
}

// salt.utils.dictupdate.update.
value dict_update(value dest, const value& upd, bool recursive, bool merge_lists) {
  if (!dest.is_dict() || !upd.is_dict()) {
    throw render::template_error("Cannot update using non-dict types in dictupdate.update()");
  }
  bool shared = false;
  for (const auto& [k, v] : upd.dict().entries) {
    if (dest.dict().find(k)) shared = true;
  }
  if (!shared) recursive = false;
  if (recursive) {
    // A copy of the entries: upd may be dest itself.
    auto entries = upd.dict().entries;
    for (const auto& [k, val] : entries) {
      value* sub = dest.dict().find(k);
      if (sub && sub->is_dict() && val.is_dict()) {
        value r = dict_update(*sub, val, true, merge_lists);
        dest.dict().set(k, r);
      } else if (sub && sub->is_list() && val.is_list()) {
        if (merge_lists) {
          value merged = deepcopy(*sub);
          for (const auto& x : val.items()) {
            if (!list_has(merged, x)) merged.items().push_back(x);
          }
          dest.dict().set(k, merged);
        } else {
          dest.dict().set(k, val);
        }
      } else {
        dest.dict().set(k, val);
      }
    }
    return dest;
  }
  auto entries = upd.dict().entries;
  for (const auto& [k, val] : entries) dest.dict().set(k, val);
  return dest;
}

// salt.utils.dictupdate.merge.
value merge(value a, const value& b, std::string strategy, const std::string& renderer,
            bool merge_lists) {
  if (strategy == "smart") {
    strategy = (renderer.ends_with("yamlex") || renderer.starts_with("yamlex_")) ? "aggregate"
                                                                                 : "recurse";
  }
  if (strategy == "overwrite" && a.is_dict() && b.is_dict()) {
    for (const auto& [k, v] : b.dict().entries) {
      if (a.dict().find(k)) a.dict().set(k, v);
    }
  }
  if (strategy == "none") merge_lists = false;
  return dict_update(deepcopy(a), b, true, merge_lists);
}

// Positional and keyword arguments bound to a Python signature.
class binder {
 public:
  binder(const std::string& fun, call_args& a, std::vector<std::pair<std::string, value>> params,
         bool varargs = false)
      : names_(params.size()) {
    for (size_t i = 0; i < params.size(); ++i) {
      names_[i] = params[i].first;
      vals_.push_back(params[i].second);
    }
    size_t n = a.positional.size();
    if (n > params.size() && !varargs) {
      throw render::template_error(fun + "() takes at most " + std::to_string(params.size()) +
                                   " positional arguments (" + std::to_string(n) + " given)");
    }
    for (size_t i = 0; i < n && i < params.size(); ++i) {
      vals_[i] = a.positional[i];
      given_.push_back(i);
    }
    for (auto& [k, v] : a.keyword) {
      for (size_t i = 0; i < names_.size(); ++i) {
        if (names_[i] == k) {
          vals_[i] = v;
          given_.push_back(i);
        }
      }
    }
    for (size_t i = 0; i < vals_.size(); ++i) {
      if (vals_[i].is_undefined() && vals_[i].undefined_message() == "required") {
        throw render::template_error(fun + "() missing required argument: '" + names_[i] + "'");
      }
    }
  }
  const value& operator[](const std::string& name) const {
    for (size_t i = 0; i < names_.size(); ++i) {
      if (names_[i] == name) return vals_[i];
    }
    static const value none;
    return none;
  }
  std::string str(const std::string& name) const { return (*this)[name].str(); }
  bool flag(const std::string& name) const { return (*this)[name].truthy(); }

 private:
  std::vector<std::string> names_;
  std::vector<value> vals_;
  std::vector<size_t> given_;
};

value required() { return value::undefined("required"); }

value sdb(value v) { return v; }

// The master's options as a minion sees them: pillar key 'master' when it
// is a mapping.
value master_of(const value& pillar) {
  if (pillar.is_dict()) {
    if (value* m = pillar.dict().find(value("master")); m && m->is_dict()) return *m;
  }
  return value::make_dict();
}

nlohmann::json plain(const nlohmann::ordered_json& j) { return nlohmann::json(j); }

// Runs registry function `fun` to completion on a private io_context.
value run_registry(const modules::registry& reg, modules::minion_context* ctx,
                   const std::string& fun, call_args& a) {
  modules::call c;
  c.fun = fun;
  for (const auto& p : a.positional) c.args.push_back(plain(p.to_json()));
  for (const auto& [k, v] : a.keyword) c.kwargs[k] = plain(v.to_json());
  c.jid = "render";
  c.context = ctx;
  asio::io_context io;
  modules::outcome out;
  bool done = false;
  std::exception_ptr failure;
  asio::co_spawn(io, modules::execute(reg, std::move(c)),
                 [&](std::exception_ptr e, modules::outcome r) {
                   done = true;
                   failure = e;
                   out = std::move(r);
                 });
  io.run();
  if (!done || failure) {
    throw render::template_error("Problem running salt function in Jinja template: " + fun +
                                 " did not finish");
  }
  if (!out.success) {
    std::string msg = out.ret.is_string() ? out.ret.get<std::string>() : out.ret.dump();
    if (msg.starts_with("ERROR: ")) msg = msg.substr(7);
    throw render::template_error("Problem running salt function in Jinja template: " + msg);
  }
  return value::from_json(nlohmann::ordered_json(out.ret));
}

std::string os_path_join(const std::vector<std::string>& parts) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string& p = parts[i];
    if (i == 0) {
      out = p;
    } else if (p.starts_with("/")) {
      out = p;
    } else if (out.empty() || out.ends_with("/")) {
      out += p;
    } else {
      out += "/" + p;
    }
  }
  return out;
}

// The `salt` dict as make_salt builds it: ~300 functions and their modules'
// namespaces, indexed by name while it is built (the dict itself finds keys
// by comparing each: built that way, once per template, it took a fifth of
// a 200-state apply).
struct salt_table {
  value dict = value::make_dict();
  std::unordered_map<std::string, size_t> at;  // key -> its entry's position

  // dict[key] = v, in Python's order (a new key goes last).
  value& put(const std::string& key, value v) {
    auto& entries = dict.dict().entries;
    auto [it, fresh] = at.emplace(key, entries.size());
    if (fresh) {
      entries.emplace_back(value(key), std::move(v));
    } else {
      entries[it->second].second = std::move(v);
    }
    return entries[it->second].second;
  }
  value* find(const std::string& key) {
    auto it = at.find(key);
    return it == at.end() ? nullptr : &dict.dict().entries[it->second].second;
  }
};

void add(salt_table& salt, const std::string& name, render::function fn) {
  value callable = value::make_callable(name, std::move(fn));
  salt.put(name, callable);
  auto dot = name.find('.');
  std::string mod = name.substr(0, dot);
  value* m = salt.find(mod);
  if (!m || !m->is_dict()) {
    // A namespace, not a dict: `salt.config.get` and `salt.pillar.items` are
    // the functions (Salt's loader namespaces), not dict methods.
    m = &salt.put(mod, value::make_namespace());
  }
  m->dict().set(value(name.substr(dot + 1)), callable);
}

}  // namespace

value make_salt(compiler& cc, const modules::registry& reg, modules::minion_context* ctx) {
  salt_table salt;
  for (const auto& name : reg.names()) {
    if (name.find('.') == std::string::npos) continue;
    add(salt, name, [&reg, ctx, name](call_args& a) { return run_registry(reg, ctx, name, a); });
  }
  // Salt's AliasedLoader: templates' cmd.run is cmd.shell.
  if (reg.find("cmd.shell")) {
    add(salt, "cmd.run", [&reg, ctx](call_args& a) { return run_registry(reg, ctx, "cmd.shell", a); });
  }
  compiler* c = &cc;

  add(salt, "grains.get", [c](call_args& a) {
    binder b("grains.get", a, {{"key", required()}, {"default", value("")}, {"delimiter", value(":")}, {"ordered", value(true)}});
    return traverse(c->grains(), b.str("key"), b["default"], b.str("delimiter"));
  });
  add(salt, "grains.filter_by", [c](call_args& a) {
    binder b("grains.filter_by", a,
             {{"lookup_dict", required()}, {"grain", value("os_family")}, {"merge", value(nullptr)},
              {"default", value("default")}, {"base", value(nullptr)}});
    const value& lookup = b["lookup_dict"];
    if (!lookup.is_dict()) throw render::template_error("filter_by: lookup_dict must be a dictionary");
    value ret = value::undefined("none");
    value val = traverse(c->grains(), b.str("grain"), value::make_list(), ":");
    std::vector<value> each_list = val.is_list() ? val.items() : std::vector<value>{val};
    for (const auto& each : each_list) {
      for (const auto& [key, v] : lookup.dict().entries) {
        if (modules::fnmatch(key.str(), each.str())) {
          ret = v;
          break;
        }
      }
      if (!ret.is_undefined() && !ret.is_none()) break;
    }
    if (ret.is_undefined() || ret.is_none()) {
      value* d = lookup.dict().find(b["default"]);
      ret = d ? *d : value(nullptr);
    }
    const value& base = b["base"];
    if (base.truthy()) {
      if (value* bv = lookup.dict().find(base)) {
        if (ret.is_none()) {
          ret = *bv;
        } else if (bv->is_dict()) {
          if (!ret.is_dict()) {
            throw render::template_error("filter_by default and look-up values must both be dictionaries.");
          }
          ret = dict_update(deepcopy(*bv), ret, true, false);
        }
      }
    }
    const value& m = b["merge"];
    if (m.truthy()) {
      if (!m.is_dict()) throw render::template_error("filter_by merge argument must be a dictionary.");
      if (ret.is_none()) {
        ret = m;
      } else {
        dict_update(ret, deepcopy(m), true, false);
      }
    }
    return ret;
  });
  add(salt, "pillar.get", [c](call_args& a) {
    binder b("pillar.get", a,
             {{"key", required()}, {"default", value("")}, {"merge", value(false)},
              {"merge_nested_lists", value(nullptr)}, {"delimiter", value(":")},
              {"pillarenv", value(nullptr)}, {"saltenv", value(nullptr)}});
    const value& pillar = c->pillar();
    // Salt compiles a pillar for another pillarenv on request; a compile
    // holds only the minion's own.
    if (!b["pillarenv"].is_none()) {
      value* own = c->opts().is_dict() ? c->opts().dict().find(value("pillarenv")) : nullptr;
      if (own == nullptr || !render::equal(*own, b["pillarenv"])) {
        throw render::template_error(
            "pillar.get: pillarenv='" + b["pillarenv"].str() +
            "' asks for a pillar compiled for that environment alone; a state compile has the "
            "minion's own pillar only: leave pillarenv out, or set the minion's pillarenv");
      }
    }
    value def = b["default"];
    bool merge_lists = false;
    if (!b["merge_nested_lists"].is_none()) {
      merge_lists = b.flag("merge_nested_lists");
    } else if (value* pml = c->opts().is_dict() ? c->opts().dict().find(value("pillar_merge_lists")) : nullptr) {
      merge_lists = pml->truthy();
    }
    if (b.flag("merge")) {
      if (def.is_dict()) {
        value ret = traverse(pillar, b.str("key"), value::make_dict(), b.str("delimiter"));
        if (ret.is_dict()) return dict_update(deepcopy(def), ret, true, merge_lists);
      } else if (def.is_list()) {
        value ret = traverse(pillar, b.str("key"), value::make_list(), b.str("delimiter"));
        if (ret.is_list()) {
          value out = deepcopy(def);
          for (const auto& x : ret.items()) {
            if (!list_has(out, x)) out.items().push_back(x);
          }
          return out;
        }
      }
    }
    return traverse(pillar, b.str("key"), def, b.str("delimiter"));
  });
  add(salt, "config.get", [c](call_args& a) {
    binder b("config.get", a,
             {{"key", required()}, {"default", value("")}, {"merge", value(nullptr)},
              {"omit_opts", value(false)}, {"omit_pillar", value(false)},
              {"omit_master", value(false)}, {"omit_grains", value(false)},
              {"delimiter", value(":")}});
    const value marker("_|-");
    std::string key = b.str("key"), delim = b.str("delimiter");
    auto look = [&](const value& where) { return traverse(where, key, marker, delim); };
    if (!b["merge"].is_none()) {
      // Salt: Salt's defaults, then the master's options, the pillar, the
      // grains and the minion's options merged over them (omit_* do not
      // apply), then walked.
      std::string strategy = b["merge"].str();
      if (strategy != "recurse" && strategy != "overwrite") strategy = "recurse";
      value data = value::from_json(nlohmann::ordered_json(modules::config_defaults()));
      auto over = [&](const value& src, const char* what) {
        if (!src.is_dict()) {
          throw render::template_error(std::string("config.get: cannot merge ") + what +
                                       ": it must be a dictionary");
        }
        if (strategy == "overwrite") {
          for (const auto& [k, v] : src.dict().entries) data.dict().set(k, v);
        }
        data = dict_update(deepcopy(data), src, true, false);
      };
      value* master = c->pillar().is_dict() ? c->pillar().dict().find(value("master")) : nullptr;
      over(master ? *master : value::make_dict(), "pillar key 'master' (the master's options)");
      over(c->pillar(), "the pillar");
      over(c->grains(), "the grains");
      over(c->opts(), "the minion's options");
      value r = look(data);
      return render::equal(r, marker) ? b["default"] : sdb(r);
    }
    if (!b.flag("omit_opts")) {
      value r = look(c->opts());
      if (!render::equal(r, marker)) return sdb(r);
    }
    if (!b.flag("omit_grains")) {
      value r = look(c->grains());
      if (!render::equal(r, marker)) return sdb(r);
    }
    if (!b.flag("omit_pillar")) {
      value r = look(c->pillar());
      if (!render::equal(r, marker)) return sdb(r);
    }
    if (!b.flag("omit_master") && c->pillar().is_dict()) {
      if (value* master = c->pillar().dict().find(value("master"))) {
        value r = look(*master);
        if (!render::equal(r, marker)) return sdb(r);
      }
    }
    value r = look(value::from_json(nlohmann::ordered_json(modules::config_defaults())));
    return render::equal(r, marker) ? b["default"] : sdb(r);
  });
  // config.option, config.merge and config.dot_vals read the compile's own
  // pillar (an inline pillar= included) and hand back the sources' own
  // objects (Salt's), so they run here, keeping key order.
  add(salt, "config.option", [c](call_args& a) {
    binder b("config.option", a,
             {{"value", required()}, {"default", value(nullptr)}, {"omit_opts", value(false)},
              {"omit_grains", value(false)}, {"omit_pillar", value(false)},
              {"omit_master", value(false)}, {"omit_all", value(false)},
              {"wildcard", value(false)}});
    bool all = b.flag("omit_all"), wildcard = b.flag("wildcard");
    value dflt = b["default"];
    if (dflt.is_none()) dflt = wildcard ? value::make_dict() : value("");
    const value& key = b["value"];
    value defaults = value::from_json(nlohmann::ordered_json(modules::config_defaults()));
    value master = master_of(c->pillar());
    // In Salt's order of precedence; omitted sources are null.
    const value* sources[] = {all || b.flag("omit_opts") ? nullptr : &c->opts(),
                              all || b.flag("omit_grains") ? nullptr : &c->grains(),
                              all || b.flag("omit_pillar") ? nullptr : &c->pillar(),
                              all || b.flag("omit_master") ? nullptr : &master};
    if (!wildcard) {
      for (const value* src : sources) {
        if (src == nullptr || !src->is_dict()) continue;
        if (value* v = src->dict().find(key)) return *v;
      }
      if (value* v = defaults.dict().find(key)) return *v;
      return dflt;
    }
    if (!key.is_string()) {
      throw render::template_error("config.option: with wildcard, value must be a glob");
    }
    std::string glob = key.str();
    value found = value::make_dict();
    for (int i = 3; i >= 0; --i) {
      if (sources[i] == nullptr || !sources[i]->is_dict()) continue;
      for (const auto& [k, v] : sources[i]->dict().entries) {
        if (k.is_string() && modules::fnmatch(glob, k.str())) found.dict().set(k, v);
      }
    }
    for (const auto& [k, v] : defaults.dict().entries) {
      if (modules::fnmatch(glob, k.str()) && !found.dict().find(k)) found.dict().set(k, v);
    }
    return found.dict().entries.empty() ? dflt : found;
  });
  add(salt, "config.dot_vals", [c](call_args& a) {
    binder b("config.dot_vals", a, {{"value", required()}});
    std::string prefix = b.str("value") + ".";
    value found = value::make_dict();
    value master = master_of(c->pillar());
    const value* sources[] = {&master, &c->opts()};
    for (const value* src : sources) {
      if (!src->is_dict()) continue;
      for (const auto& [k, v] : src->dict().entries) {
        if (k.is_string() && k.str().starts_with(prefix)) found.dict().set(k, v);
      }
    }
    return found;
  });
  add(salt, "config.merge", [c](call_args& a) {
    binder b("config.merge", a,
             {{"value", required()}, {"default", value("")}, {"omit_opts", value(false)},
              {"omit_master", value(false)}, {"omit_pillar", value(false)}});
    const value& key = b["value"];
    value master = master_of(c->pillar());
    const value* sources[] = {b.flag("omit_opts") ? nullptr : &c->opts(),
                              b.flag("omit_master") ? nullptr : &master,
                              b.flag("omit_pillar") ? nullptr : &c->pillar()};
    value ret(nullptr);
    for (const value* src : sources) {
      if (src == nullptr || !src->is_dict()) continue;
      value* v = src->dict().find(key);
      if (v == nullptr) continue;
      if (ret.is_none()) {
        ret = *v;
        if (ret.is_string()) return ret;
      } else if (ret.is_dict() && v->is_dict()) {
        // Salt's tmp.update(ret): the later source's own dict, changed in
        // place, the earlier source's keys over it.
        for (const auto& [k, x] : ret.dict().entries) v->dict().set(k, x);
        ret = *v;
      } else if (ret.is_sequence_like() && v->is_sequence_like()) {
        std::vector<value> joined = ret.items();
        for (const auto& x : v->items()) joined.push_back(x);
        ret = value::make_list(std::move(joined));
      }
    }
    if (!ret.is_none()) return ret;
    value defaults = value::from_json(nlohmann::ordered_json(modules::config_defaults()));
    if (value* v = defaults.dict().find(key)) return *v;
    return b["default"];
  });
  add(salt, "defaults.merge", [](call_args& a) {
    binder b("defaults.merge", a,
             {{"dest", required()}, {"src", required()}, {"merge_lists", value(false)},
              {"in_place", value(true)}, {"convert_none", value(true)}});
    value src = b["src"], dest = b["dest"];
    if (src.is_none() && b.flag("convert_none")) src = value::make_dict();
    if (dest.is_none() && b.flag("convert_none")) {
      if (b.flag("in_place")) throw render::template_error("Can't perform in-place merge into NoneType");
      dest = value::make_dict();
    }
    value merged = b.flag("in_place") ? dest : deepcopy(dest);
    return dict_update(merged, src, true, b.flag("merge_lists"));
  });
  add(salt, "defaults.update", [](call_args& a) {
    binder b("defaults.update", a,
             {{"dest", required()}, {"defaults", required()}, {"merge_lists", value(true)},
              {"in_place", value(true)}, {"convert_none", value(true)}});
    value dest = b["dest"], defaults = b["defaults"];
    value nodes;
    if (b.flag("in_place")) {
      if (dest.is_none()) throw render::template_error("Can't perform in-place update into NoneType");
      nodes = dest;
    } else {
      if (dest.is_none() && b.flag("convert_none")) dest = value::make_dict();
      nodes = deepcopy(dest);
    }
    if (defaults.is_none() && b.flag("convert_none")) defaults = value::make_dict();
    if (!nodes.is_dict()) throw render::template_error("defaults.update: dest must be a dictionary");
    auto entries = nodes.dict().entries;
    for (const auto& [name, vars] : entries) {
      value v = vars;
      if (v.is_none() && b.flag("convert_none")) v = value::make_dict();
      nodes.dict().set(name, dict_update(deepcopy(defaults), v, true, b.flag("merge_lists")));
    }
    return nodes;
  });
  // Salt's defaults.get: `ns:key` walks salt://ns/defaults.yaml (else
  // defaults.json) of base; `ns` alone is the whole file; None when neither
  // file is there.
  add(salt, "defaults.get", [c](call_args& a) {
    binder b("defaults.get", a, {{"key", required()}, {"default", value("")}});
    std::string key = b.str("key");
    auto colon = key.find(':');
    std::string ns = key.substr(0, colon);
    std::string rest = colon == std::string::npos ? "" : key.substr(colon + 1);
    value data(nullptr);
    for (const char* ext : {"yaml", "json"}) {
      auto path = c->find_file(ns + "/defaults." + ext, "base");
      if (!path) continue;
      std::string text = base::read_file(*path);
      if (std::string(ext) == "yaml") {
        data = render::load_yaml_value(text, *path);
      } else {
        auto parsed = nlohmann::ordered_json::parse(text, nullptr, false);
        if (parsed.is_discarded()) {
          throw render::template_error("defaults.get: " + *path + " is not JSON");
        }
        data = value::from_json(parsed);
      }
      if (!data.truthy()) data = value::make_dict();
      break;
    }
    if (rest.empty()) return data;
    return traverse(data, rest, b["default"], ":");
  });
  add(salt, "defaults.deepcopy", [](call_args& a) {
    binder b("defaults.deepcopy", a, {{"source", required()}});
    return deepcopy(b["source"]);
  });
  add(salt, "slsutil.merge", [](call_args& a) {
    binder b("slsutil.merge", a,
             {{"obj_a", required()}, {"obj_b", required()}, {"strategy", value("smart")},
              {"renderer", value("yaml")}, {"merge_lists", value(false)}});
    return merge(b["obj_a"], b["obj_b"], b.str("strategy"), b.str("renderer"), b.flag("merge_lists"));
  });
  add(salt, "slsutil.merge_all", [](call_args& a) {
    binder b("slsutil.merge_all", a,
             {{"lst", required()}, {"strategy", value("smart")}, {"renderer", value("yaml")},
              {"merge_lists", value(false)}});
    value ret = value::make_dict();
    if (!b["lst"].is_sequence_like()) throw render::template_error("slsutil.merge_all: lst must be a list");
    for (const auto& obj : b["lst"].items()) {
      ret = merge(ret, obj, b.str("strategy"), b.str("renderer"), b.flag("merge_lists"));
    }
    return ret;
  });
  add(salt, "slsutil.update", [](call_args& a) {
    binder b("slsutil.update", a,
             {{"dest", required()}, {"upd", required()}, {"recursive_update", value(true)},
              {"merge_lists", value(false)}});
    return dict_update(b["dest"], b["upd"], b.flag("recursive_update"), b.flag("merge_lists"));
  });
  add(salt, "slsutil.file_exists", [c](call_args& a) {
    binder b("slsutil.file_exists", a, {{"path", required()}, {"saltenv", value("base")}});
    auto files = c->list_files(b.str("saltenv"));
    return value(std::find(files.begin(), files.end(), b.str("path")) != files.end());
  });
  add(salt, "slsutil.dir_exists", [c](call_args& a) {
    binder b("slsutil.dir_exists", a, {{"path", required()}, {"saltenv", value("base")}});
    std::string p = b.str("path");
    for (const auto& f : c->list_files(b.str("saltenv"))) {
      if (f.starts_with(p + "/")) return value(true);
    }
    return value(false);
  });
  add(salt, "slsutil.serialize", [](call_args& a) {
    binder b("slsutil.serialize", a, {{"serializer", required()}, {"obj", value(nullptr)}}, true);
    std::string s = b.str("serializer");
    if (s == "json") return value(python_json(b["obj"], false));
    if (s == "yaml") {
      render::yaml_dump_options o;
      o.flow_style = render::yaml_dump_options::flow::leaves;
      o.strip = false;
      return value(render::dump_yaml(b["obj"], o));
    }
    throw render::template_error("slsutil.serialize: serializer '" + s + "' is not supported by brine (json, yaml)");
  });
  add(salt, "slsutil.deserialize", [](call_args& a) {
    binder b("slsutil.deserialize", a, {{"serializer", required()}, {"stream_or_string", required()}}, true);
    std::string s = b.str("serializer");
    if (s == "json") return value::from_json(nlohmann::ordered_json::parse(b.str("stream_or_string")));
    if (s == "yaml") return render::load_yaml_value(b.str("stream_or_string"), "<string>");
    throw render::template_error("slsutil.deserialize: serializer '" + s + "' is not supported by brine (json, yaml)");
  });
  add(salt, "cp.list_states", [c](call_args& a) {
    binder b("cp.list_states", a, {{"saltenv", value("base")}});
    std::vector<value> out;
    for (auto& s : c->list_states(b.str("saltenv"))) out.emplace_back(s);
    return value::make_list(std::move(out));
  });
  add(salt, "cp.list_master", [c](call_args& a) {
    binder b("cp.list_master", a, {{"saltenv", value("base")}, {"prefix", value("")}});
    std::vector<value> out;
    for (auto& s : c->list_files(b.str("saltenv"))) {
      if (s.starts_with(b.str("prefix"))) out.emplace_back(s);
    }
    return value::make_list(std::move(out));
  });
  add(salt, "cp.list_master_dirs", [c](call_args& a) {
    binder b("cp.list_master_dirs", a, {{"saltenv", value("base")}, {"prefix", value("")}});
    std::set<std::string> dirs;
    for (auto& s : c->list_files(b.str("saltenv"))) {
      for (size_t at = s.find('/'); at != std::string::npos; at = s.find('/', at + 1)) {
        dirs.insert(s.substr(0, at));
      }
    }
    std::vector<value> out;
    for (const auto& d : dirs) {
      if (d.starts_with(b.str("prefix"))) out.emplace_back(d);
    }
    return value::make_list(std::move(out));
  });
  add(salt, "file.join", [](call_args& a) {
    std::vector<std::string> parts;
    for (const auto& p : a.positional) parts.push_back(p.str());
    return value(os_path_join(parts));
  });
  add(salt, "file.dirname", [](call_args& a) {
    binder b("file.dirname", a, {{"path", required()}});
    std::string p = b.str("path");
    auto at = p.rfind('/');
    if (at == std::string::npos) return value("");
    std::string head = p.substr(0, at + 1);
    if (head.find_first_not_of('/') != std::string::npos) {
      while (head.ends_with("/")) head.pop_back();
    }
    return value(head);
  });
  add(salt, "file.basename", [](call_args& a) {
    binder b("file.basename", a, {{"path", required()}});
    std::string p = b.str("path");
    auto at = p.rfind('/');
    return value(at == std::string::npos ? p : p.substr(at + 1));
  });
  for (const char* level : {"debug", "info", "warning", "error", "critical", "exception"}) {
    std::string name = std::string("log.") + level;
    if (salt.find(name)) continue;
    add(salt, name, [](call_args&) { return value(nullptr); });
  }
  return std::move(salt.dict);
}

}  // namespace brine::state
