#include "state/high.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "base/python.h"
#include "modules/data.h"
#include "render/python_json.h"
#include "render/value.h"

namespace brine::state {

namespace {

bool starts_with(const std::string& s, std::string_view p) { return s.starts_with(p); }

bool is_int(const json& v) { return v.is_number_integer(); }
bool is_number(const json& v) { return v.is_number(); }

// Python's str of a number.
std::string number_str(const json& v) {
  if (v.is_number_float()) return render::float_repr(v.get<double>());
  return v.dump();
}

void repr_into(const json& v, std::string& out) {
  switch (v.type()) {
    case json::value_t::string:
      base::append_python_repr(v.get_ref<const std::string&>(), out);
      return;
    case json::value_t::null:
      out += "None";
      return;
    case json::value_t::boolean:
      out += v.get<bool>() ? "True" : "False";
      return;
    case json::value_t::array: {
      out += '[';
      bool first = true;
      for (const auto& e : v) {
        if (!first) out += ", ";
        first = false;
        repr_into(e, out);
      }
      out += ']';
      return;
    }
    case json::value_t::object: {
      // High data comes from Salt's YAML renderer, whose mappings are
      // OrderedDicts (Python 3.11's repr).
      if (v.empty()) {
        out += "OrderedDict()";
        return;
      }
      out += "OrderedDict([";
      bool first = true;
      for (const auto& [k, e] : v.items()) {
        if (!first) out += ", ";
        first = false;
        out += '(';
        base::append_python_repr(k, out);
        out += ", ";
        repr_into(e, out);
        out += ')';
      }
      out += "])";
      return;
    }
    default:
      out += number_str(v);
  }
}

// Python's `x in list`.
bool list_contains(const json& list, const json& x) {
  return std::any_of(list.begin(), list.end(), [&](const json& e) { return py_equal(e, x); });
}

bool hashable(const json& v) { return !v.is_array() && !v.is_object(); }

// A key for a Python dict keyed by hashable values of any type.
std::string hkey(const json& v) {
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (std::floor(d) == d && std::abs(d) < 9e15) return std::to_string(static_cast<long long>(d));
  }
  if (v.is_boolean()) return v.get<bool>() ? "1" : "0";
  return v.dump();
}

const std::set<std::string, std::less<>>& requisite_keywords() {
  static const std::set<std::string, std::less<>> k = {
      "onchanges", "onchanges_any", "onfail", "onfail_any", "onfail_all", "onfail_stop",
      "prereq",    "prerequired",   "watch",  "watch_any",  "require",    "require_any",
      "listen"};
  return k;
}

// salt.state.find_name.
std::vector<std::pair<std::string, std::string>> find_name(const std::string& name,
                                                           const std::string& state,
                                                           const json& high, bool strict) {
  std::vector<std::pair<std::string, std::string>> ext_id;
  bool check2 = true;
  if (strict) {
    auto it = high.find(name);
    check2 = it != high.end() && it->is_object() && it->contains(state);
  }
  if (high.contains(name) && check2) {
    ext_id.emplace_back(name, state);
  } else if (state == "sls") {
    for (const auto& [nid, item] : high.items()) {
      if (!item.is_object()) continue;
      auto s = item.find("__sls__");
      if (s != item.end() && *s == name) ext_id.emplace_back(nid, first_key(item));
    }
  } else {
    for (const auto& [nid, item] : high.items()) {
      if (!item.is_object()) continue;
      auto st = item.find(state);
      if (st == item.end() || !st->is_array()) continue;
      for (const auto& arg : *st) {
        if (!arg.is_object() || arg.size() != 1) continue;
        if (py_equal(arg.begin().value(), json(name))) ext_id.emplace_back(nid, state);
      }
    }
  }
  return ext_id;
}

// salt.state.state_args.
std::set<std::string> state_args(const std::string& id, const std::string& state,
                                 const json& high) {
  std::set<std::string> args;
  auto it = high.find(id);
  if (it == high.end() || !it->is_object()) return args;
  auto st = it->find(state);
  if (st == it->end() || !st->is_array()) return args;
  for (const auto& item : *st) {
    if (item.is_object() && item.size() == 1) args.insert(item.begin().key());
  }
  return args;
}

// salt.state.find_sls_ids.
std::vector<std::pair<std::string, std::string>> find_sls_ids(const json& sls,
                                                              const json& high) {
  std::vector<std::pair<std::string, std::string>> ret;
  for (const auto& [nid, item] : high.items()) {
    if (!item.is_object()) continue;
    auto s = item.find("__sls__");
    if (s == item.end()) continue;
    if (!py_equal(*s, sls)) continue;
    for (const auto& [st, v] : item.items()) {
      if (!starts_with(st, "__")) ret.emplace_back(nid, st);
    }
  }
  return ret;
}

std::string sls_of(const json& body) {
  if (body.is_object()) {
    auto s = body.find("__sls__");
    if (s != body.end()) return py_str(*s);
  }
  return "None";
}

}  // namespace

std::string python_json_dump(const json& v, int indent) {
  render::json_dumps_options o;
  o.indent = std::string(static_cast<size_t>(std::max(0, indent)), ' ');
  return render::python_json_dumps(v, o);
}

bool py_equal(const json& a, const json& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_number_float() || b.is_number_float()) return a.get<double>() == b.get<double>();
    if (a.is_number_unsigned() || b.is_number_unsigned()) return a.dump() == b.dump();
    return a.get<int64_t>() == b.get<int64_t>();
  }
  if (a.is_boolean() && b.is_number()) return py_equal(json(a.get<bool>() ? 1 : 0), b);
  if (b.is_boolean() && a.is_number()) return py_equal(a, json(b.get<bool>() ? 1 : 0));
  if (a.type() != b.type()) return false;
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!py_equal(a[i], b[i])) return false;
    }
    return true;
  }
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (const auto& [k, v] : a.items()) {
      auto it = b.find(k);
      if (it == b.end() || !py_equal(v, *it)) return false;
    }
    return true;
  }
  return a == b;
}

std::string py_str(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  std::string out;
  repr_into(v, out);
  return out;
}

std::string first_key(const json& dict) {
  if (!dict.is_object() || dict.empty()) return {};
  return dict.begin().key();
}

errors reconcile_extend(json& high, bool strict) {
  errors errs;
  auto ext_it = high.find("__extend__");
  if (ext_it == high.end()) return errs;
  json ext = std::move(*ext_it);
  high.erase("__extend__");
  if (!ext.is_array()) return errs;
  for (auto& ext_chunk : ext) {
    if (!ext_chunk.is_object()) continue;
    for (auto& [orig_name, body] : ext_chunk.items()) {
      if (!body.is_object()) continue;
      std::string name = orig_name;
      std::string state_type;
      bool have_type = false;
      for (const auto& [k, v] : body.items()) {
        if (!starts_with(k, "__")) {
          state_type = k;
          have_type = true;
          break;
        }
      }
      if (!have_type) continue;
      auto hit = high.find(name);
      if (hit == high.end() || !hit->is_object() || !hit->contains(state_type)) {
        auto ids = find_name(name, state_type, high, strict);
        if (ids.size() != 1) {
          std::string env = body.contains("__env__") ? py_str(body["__env__"]) : "base";
          std::string sls = body.contains("__sls__") ? py_str(body["__sls__"]) : "base";
          errs.push_back("Cannot extend ID '" + name + "' in '" + env + ":" + sls +
                         "'. It is not part of the high state.\n"
                         "This is likely due to a missing include statement "
                         "or an incorrectly typed ID.\nEnsure that a "
                         "state with an ID of '" +
                         name + "' is available\nin environment '" + env + "' and to SLS '" +
                         sls + "'");
          continue;
        }
        name = ids[0].first;
      }

      std::vector<json> sls_excludes;
      if (auto ex = high.find("__exclude__"); ex != high.end() && ex->is_array()) {
        for (const auto& e : *ex) {
          if (e.is_string()) {
            sls_excludes.push_back(e);
          } else if (e.is_object()) {
            auto s = e.find("sls");
            if (s != e.end() && !s->is_null() && !(s->is_string() && s->get_ref<const std::string&>().empty())) {
              sls_excludes.push_back(*s);
            }
          }
        }
      }
      if (auto s = body.find("__sls__"); s != body.end()) {
        bool excluded = std::any_of(sls_excludes.begin(), sls_excludes.end(),
                                    [&](const json& e) { return py_equal(e, *s); });
        if (excluded) continue;
      }

      json& target = high[name];
      if (!target.is_object()) continue;
      for (auto& [state, run] : body.items()) {
        if (starts_with(state, "__")) continue;
        if (!target.contains(state)) {
          target[state] = run;
          continue;
        }
        json& decl = target[state];
        if (!decl.is_array() || !run.is_array()) continue;
        for (const auto& arg : run) {
          bool update = false;
          for (size_t hind = 0; hind < decl.size(); ++hind) {
            json& val = decl[hind];
            if (arg.is_string() && val.is_string()) {
              val = arg;
              update = true;
              continue;
            }
            if (arg.is_object() && val.is_object()) {
              std::string argfirst = first_key(arg);
              if (argfirst == first_key(val)) {
                if (requisite_keywords().contains(argfirst)) {
                  json& list = val[argfirst];
                  if (list.is_array() && arg[argfirst].is_array()) {
                    for (const auto& r : arg[argfirst]) list.push_back(r);
                  }
                } else {
                  val = arg;
                }
                update = true;
              }
              if (argfirst == "name" && first_key(decl[hind]) == "names") decl[hind] = arg;
            }
          }
          if (!update) decl.push_back(arg);
        }
      }
    }
  }
  return errs;
}

errors verify_high(const json& high) {
  errors errs;
  if (!high.is_object()) {
    errs.push_back("High data is not a dictionary and is invalid");
    return errs;
  }
  // Salt's reqs: {id: {"state": state, req_val: req_key, ...}}, keyed by
  // any hashable value.
  json reqs = json::object();
  for (const auto& [name, body] : high.items()) {
    if (starts_with(name, "__")) continue;
    if (!body.is_object()) {
      errs.push_back("The type " + name + " in " + py_str(body) +
                     " is not formatted as a dictionary");
      continue;
    }
    std::string sls = sls_of(body);
    for (const auto& [state, decl] : body.items()) {
      if (starts_with(state, "__")) continue;
      if (decl.is_null()) {
        errs.push_back("ID '" + name + "' in SLS '" + sls +
                       "' contains a short declaration (" + state +
                       ") with a trailing colon. When not passing any arguments to a state, the "
                       "colon must be omitted.");
        continue;
      }
      if (!decl.is_array()) {
        errs.push_back("State '" + name + "' in SLS '" + sls + "' is not formed as a list");
        continue;
      }
      int fun = 0;
      if (state.find('.') != std::string::npos) ++fun;
      for (const auto& arg : decl) {
        if (arg.is_string()) {
          ++fun;
          std::string s = arg.get<std::string>();
          auto b = s.find_first_not_of(" \t\n\r\f\v");
          auto e = s.find_last_not_of(" \t\n\r\f\v");
          std::string stripped = b == std::string::npos ? "" : s.substr(b, e - b + 1);
          if (stripped.find(' ') != std::string::npos) {
            errs.push_back("The function \"" + s + "\" in state \"" + name + "\" in SLS \"" +
                           sls +
                           "\" has whitespace, a function with whitespace is not supported, "
                           "perhaps this is an argument that is missing a \":\"");
          }
        } else if (arg.is_object()) {
          if (arg.empty()) continue;  // Salt: StopIteration; nothing sensible to report
          std::string argfirst = first_key(arg);
          const json& av = arg.begin().value();
          if (argfirst == "names" && !av.is_array()) {
            errs.push_back("The 'names' argument in state '" + name + "' in SLS '" + sls +
                           "' needs to be formed as a list");
          }
          if (argfirst == "require" || argfirst == "watch" || argfirst == "prereq" ||
              argfirst == "onchanges") {
            if (!av.is_array()) {
              errs.push_back("The " + argfirst + " statement in state '" + name + "' in SLS '" +
                             sls + "' needs to be formed as a list");
            } else {
              json& mine = reqs[hkey(json(name))];
              mine = json::object();
              mine[hkey(json("state"))] = state;
              for (json req : av) {
                if (req.is_string()) req = json{{"id", req}};
                if (!req.is_object()) {
                  std::string r;
                  repr_into(req, r);
                  errs.push_back("Requisite declaration " + r + " in SLS " + sls +
                                 " is not formed as a single key dictionary");
                  continue;
                }
                if (req.empty()) continue;
                std::string req_key = first_key(req);
                const json& req_val = req.begin().value();
                if (auto dot = req_key.find('.'); dot != std::string::npos) {
                  errs.push_back("Invalid requisite type '" + req_key + "' in state '" + name +
                                 "', in SLS '" + sls +
                                 "'. Requisite types must not contain dots, did you mean '" +
                                 req_key.substr(0, dot) + "'?");
                }
                if (!hashable(req_val)) {
                  errs.push_back("Illegal requisite \"" + py_str(req_val) +
                                 "\", please check your syntax.\n");
                  continue;
                }
                reqs[hkey(json(name))][hkey(req_val)] = req_key;
                auto other = reqs.find(hkey(req_val));
                if (other != reqs.end()) {
                  auto back = other->find(hkey(json(name)));
                  if (back != other->end() && *back == state) {
                    const json& ostate = (*other)[hkey(json("state"))];
                    if (ostate == reqs[hkey(json(name))][hkey(req_val)]) {
                      errs.push_back("A recursive requisite was found, SLS \"" + sls +
                                     "\" ID \"" + name + "\" ID \"" + py_str(req_val) + "\"");
                    }
                  }
                }
              }
            }
            if (arg.size() != 1) {
              errs.push_back("Multiple dictionaries defined in argument of state '" + name +
                             "' in SLS '" + sls + "'");
            }
          }
        }
      }
      if (fun == 0) {
        if (state == "require" || state == "watch") continue;
        errs.push_back("No function declared in state '" + name + "' in SLS '" + sls + "'");
      } else if (fun > 1) {
        std::string funs;
        auto add = [&](const std::string& f) {
          if (!funs.empty()) funs += ", ";
          funs += f;
        };
        if (auto dot = state.find('.'); dot != std::string::npos) add(state.substr(dot + 1));
        for (const auto& arg : decl) {
          if (arg.is_string()) add(arg.get<std::string>());
        }
        errs.push_back("Too many functions declared in state '" + name + "' in SLS '" + sls +
                       "'. Please choose one of the following: " + funs);
      }
    }
  }
  return errs;
}

namespace {

// extend[name][_state] gets {rkey: [{state: id}]}, or {state: id} added to
// the rkey entry already there.
void add_req(json& extend, const std::string& name, const std::string& st,
             const std::string& rkey, const std::string& state, const std::string& id,
             const json& body) {
  json& e = extend[name];
  if (!e.is_object()) e = json::object();
  if (!e.contains(st)) e[st] = json::array();
  e["__env__"] = body.contains("__env__") ? body["__env__"] : json();
  e["__sls__"] = body.contains("__sls__") ? body["__sls__"] : json();
  bool found = false;
  for (auto& item : e[st]) {
    if (first_key(item) == rkey) {
      item[rkey].push_back(json{{state, id}});
      found = true;
    }
  }
  if (!found) e[st].push_back(json{{rkey, json::array({json{{state, id}}})}});
}

// Salt's requisite_in error for `state.fun` where a state name belongs.
std::string dotted_requisite_in(const std::string& rkey, const std::string& st,
                                const std::string& name, const json& body) {
  return "Invalid requisite in " + rkey + ": " + st + " for " + name + ", in SLS '" +
         sls_of(body) + "'. Requisites must not contain dots, did you mean '" +
         st.substr(0, st.find('.')) + "'?";
}

// Salt's req_in: the keywords requisite_in acts on.
const std::set<std::string, std::less<>>& req_in() {
  static const std::set<std::string, std::less<>> k = {
      "require_in", "watch_in", "onfail_in", "onchanges_in", "use", "use_in", "prereq",
      "prereq_in"};
  return k;
}

// Salt's req_in_all: req_in and the plain requisites, which use and use_in
// never copy.
const std::set<std::string, std::less<>>& req_in_all() {
  static const std::set<std::string, std::less<>> k = {
      "require_in", "watch_in", "onfail_in", "onchanges_in", "use",    "use_in",     "prereq",
      "prereq_in",  "require",  "watch",     "onfail",       "onfail_stop", "onchanges"};
  return k;
}

// use and use_in: the single-key arguments of `from` appended to `to`, but
// for requisites, name and names, and those `to` has (`to_args`).
void use_args(const json& from, const std::set<std::string>& to_args, json& to) {
  for (const auto& a : from) {
    if (!a.is_object() || a.size() != 1) continue;
    std::string k = first_key(a);
    if (req_in_all().contains(k) || to_args.contains(k)) continue;
    if (k == "name" || k == "names") continue;
    to.push_back(a);
  }
}

json& ext_list(json& extend, const std::string& id, const std::string& st) {
  json& e = extend[id];
  if (!e.is_object()) e = json::object();
  if (!e.contains(st)) e[st] = json::array();
  return e[st];
}

}  // namespace

errors requisite_in(json& high, const std::vector<std::string>& disabled) {
  json extend = json::object();
  errors errs;
  for (const auto& [id, body] : high.items()) {
    if (!body.is_object()) continue;
    for (const auto& [state, run] : body.items()) {
      if (starts_with(state, "__")) continue;
      if (!run.is_array()) continue;
      for (const auto& arg : run) {
        if (!arg.is_object() || arg.empty()) continue;
        std::string key = first_key(arg);
        if (!req_in().contains(key)) continue;
        if (std::find(disabled.begin(), disabled.end(), key) != disabled.end()) continue;
        std::string rkey = key.substr(0, key.find('_'));
        const json& items = arg.begin().value();
        if (items.is_object()) {
          for (const auto& [st0, nm] : items.items()) {
            std::string st = st0;
            std::string name = py_str(nm);
            if (!extend.contains(name)) extend[name] = json::object();
            if (auto dot = st.find('.'); dot != std::string::npos) {
              errs.push_back(dotted_requisite_in(rkey, st, name, body));
              st = st.substr(0, dot);
            }
            add_req(extend, name, st, rkey, state, id, body);
          }
        }
        if (!items.is_array()) continue;
        std::vector<std::pair<std::string, std::string>> hinges;
        for (json ind : items) {
          if (!ind.is_object()) {
            std::string s = py_str(ind);
            auto h = high.find(s);
            if (ind.is_string() && h != high.end() && h->is_object()) {
              std::string first;
              for (const auto& [k, v] : h->items()) {
                if (!starts_with(k, "__")) {
                  first = k;
                  break;
                }
              }
              ind = json{{first, ind}};
            } else {
              bool found = false;
              json replacement;
              for (const auto& [nid, nbody] : high.items()) {
                if (!nbody.is_object()) continue;
                for (const auto& [st8, decl] : nbody.items()) {
                  if (starts_with(st8, "__") || !decl.is_array()) continue;
                  for (const auto& j : decl) {
                    if (j.is_object() && j.contains("name") && py_equal(j["name"], ind)) {
                      replacement = json{{st8, nid}};
                      found = true;
                    }
                  }
                }
              }
              if (!found) continue;
              ind = replacement;
            }
          }
          if (ind.empty()) continue;
          std::string pstate = first_key(ind);
          const json& pname = ind.begin().value();
          if (pstate == "sls") {
            hinges = find_sls_ids(pname, high);
          } else {
            hinges.emplace_back(py_str(pname), pstate);
          }
          if (pstate.find('.') != std::string::npos) {
            errs.push_back(dotted_requisite_in(rkey, pstate, py_str(pname), body));
          }
          for (const auto& [name, st] : hinges) {
            if (key == "prereq_in") {
              ext_list(extend, id, state)
                  .push_back(json{{"prerequired", json::array({json{{st, name}}})}});
            }
            if (key == "prereq") {
              for (const auto& [ext_id, req_state] : find_name(name, st, high, true)) {
                ext_list(extend, ext_id, req_state)
                    .push_back(json{{"prerequired", json::array({json{{state, id}}})}});
              }
              continue;
            }
            if (key == "use_in" || key == "use") {
              // use_in gives this state's arguments to the named one; use
              // takes the named one's.
              for (const auto& [ext_id, req_state] : find_name(name, st, high, true)) {
                if (ext_id.empty()) continue;
                if (key == "use_in") {
                  use_args(high[id][state], state_args(ext_id, st, high),
                           ext_list(extend, ext_id, req_state));
                } else {
                  use_args(high[ext_id][req_state], state_args(id, state, high),
                           ext_list(extend, id, state));
                }
              }
              continue;
            }
            add_req(extend, name, st, rkey, state, id, body);
          }
        }
      }
    }
  }
  json ext = json::array();
  for (auto& [k, v] : extend.items()) ext.push_back(json{{k, v}});
  high["__extend__"] = std::move(ext);
  auto more = reconcile_extend(high, true);
  errs.insert(errs.end(), more.begin(), more.end());
  return errs;
}

void apply_exclude(json& high) {
  auto it = high.find("__exclude__");
  if (it == high.end()) return;
  json exclude = std::move(*it);
  high.erase("__exclude__");
  std::vector<std::string> ex_sls;
  std::vector<std::string> ex_id;
  if (exclude.is_array()) {
    for (const auto& exc : exclude) {
      if (exc.is_string()) ex_sls.push_back(exc.get<std::string>());
      if (exc.is_object() && exc.size() == 1) {
        std::string key = first_key(exc);
        if (key == "sls") ex_sls.push_back(py_str(exc["sls"]));
        if (key == "id") ex_id.push_back(py_str(exc["id"]));
      }
    }
  }
  if (!ex_sls.empty()) {
    for (const auto& [name, body] : high.items()) {
      if (starts_with(name, "__") || !body.is_object()) continue;
      auto s = body.find("__sls__");
      if (s == body.end() || !s->is_string() || s->get_ref<const std::string&>().empty()) continue;
      for (const auto& ex : ex_sls) {
        if (modules::fnmatch(ex, s->get_ref<const std::string&>())) ex_id.push_back(name);
      }
    }
  }
  for (const auto& id : ex_id) high.erase(id);
}

json compile_high_data(const json& high) {
  json chunks = json::array();
  for (const auto& [name, body] : high.items()) {
    if (starts_with(name, "__") || !body.is_object()) continue;
    for (const auto& [state, run] : body.items()) {
      if (starts_with(state, "__")) continue;
      std::vector<std::string> funcs;
      json names = json::array();
      json chunk = json::object();
      chunk["state"] = state;
      chunk["name"] = name;
      if (body.contains("__sls__")) chunk["__sls__"] = body["__sls__"];
      if (body.contains("__env__")) chunk["__env__"] = body["__env__"];
      chunk["__id__"] = name;
      if (run.is_array()) {
        for (const auto& arg : run) {
          if (arg.is_string()) {
            if (std::find(funcs.begin(), funcs.end(), arg.get<std::string>()) == funcs.end()) {
              funcs.push_back(arg.get<std::string>());
            }
            continue;
          }
          if (!arg.is_object()) continue;
          for (const auto& [key, val] : arg.items()) {
            if (key == "names") {
              if (val.is_array() || val.is_object()) {
                for (const auto& n : val.is_object() ? json(json::array()) : val) {
                  if (!list_contains(names, n)) names.push_back(n);
                }
                if (val.is_object()) {
                  for (const auto& [k, v] : val.items()) {
                    if (!list_contains(names, json(k))) names.push_back(k);
                  }
                }
              } else if (val.is_string()) {
                for (char c : val.get<std::string>()) {
                  json n = std::string(1, c);
                  if (!list_contains(names, n)) names.push_back(n);
                }
              }
            } else if (key == "state") {
              continue;
            } else if (key == "name" && !val.is_string()) {
              chunk[key] = name;
            } else {
              chunk[key] = val;
            }
          }
        }
      }
      // Salt appends the same dict once per function, so with several the
      // last function (in set order) wins; verify_high reports that case.
      if (!names.empty()) {
        int name_order = 1;
        for (const auto& entry : names) {
          json live = chunk;
          if (entry.is_object() && !entry.empty()) {
            live["name"] = first_key(entry);
            const json& updates = entry.begin().value();
            if (updates.is_array()) {
              for (const auto& u : updates) {
                if (!u.is_object()) continue;
                for (const auto& [k, v] : u.items()) live[k] = v;
              }
            }
          } else {
            live["name"] = entry;
          }
          live["name_order"] = name_order++;
          if (funcs.empty()) continue;
          live["fun"] = funcs.back();
          for (size_t i = 0; i < funcs.size(); ++i) chunks.push_back(live);
        }
      } else {
        if (funcs.empty()) continue;
        json live = chunk;
        live["fun"] = funcs.back();
        for (size_t i = 0; i < funcs.size(); ++i) chunks.push_back(live);
      }
    }
  }
  order_chunks(chunks);
  return chunks;
}

void order_chunks(json& chunks) {
  int64_t cap = 1;
  for (const auto& chunk : chunks) {
    auto o = chunk.find("order");
    if (o == chunk.end() || !is_int(*o)) continue;
    int64_t order = o->get<int64_t>();
    if (order > cap - 1 && order > 0) cap = order + 100;
  }
  for (auto& chunk : chunks) {
    if (!chunk.contains("order")) {
      chunk["order"] = cap;
      continue;
    }
    json& order = chunk["order"];
    if (!is_number(order) || order.is_boolean()) {
      if (order == "last") {
        order = cap + 1000000;
      } else if (order == "first") {
        order = 0;
      } else {
        order = cap;
      }
    }
    if (auto no = chunk.find("name_order"); no != chunk.end()) {
      double add = no->get<double>() / 10000.0;
      double base = order.get<double>();
      chunk.erase("name_order");
      chunk["order"] = base + add;
    }
    json& o2 = chunk["order"];
    if (o2.get<double>() < 0) {
      if (o2.is_number_float()) {
        o2 = static_cast<double>(cap + 1000000) + o2.get<double>();
      } else {
        o2 = cap + 1000000 + o2.get<int64_t>();
      }
    }
  }
  std::vector<std::pair<std::string, size_t>> keys;
  std::vector<json> items;
  items.reserve(chunks.size());
  for (auto& c : chunks) items.push_back(std::move(c));
  std::vector<size_t> idx(items.size());
  std::vector<std::string> text(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    idx[i] = i;
    const json& c = items[i];
    auto part = [&](const char* k) { return c.contains(k) ? py_str(c[k]) : std::string(); };
    text[i] = part("state") + part("name") + part("fun");
  }
  auto num = [&](size_t i) { return items[i]["order"].get<double>(); };
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
    double oa = num(a), ob = num(b);
    if (oa != ob) return oa < ob;
    return text[a] < text[b];
  });
  json out = json::array();
  for (size_t i : idx) out.push_back(std::move(items[i]));
  chunks = std::move(out);
}

low_result compile_low(json high, const std::vector<std::string>& disabled) {
  low_result r;
  r.errs = reconcile_extend(high);
  auto v = verify_high(high);
  r.errs.insert(r.errs.end(), v.begin(), v.end());
  // Salt runs requisite_in even when verify_high complained (it reports
  // every error together).
  auto q = requisite_in(high, disabled);
  r.errs.insert(r.errs.end(), q.begin(), q.end());
  apply_exclude(high);
  if (!r.errs.empty()) return r;
  r.chunks = compile_high_data(high);
  return r;
}

void handle_extend(json& state, const std::string& sls, const std::string& saltenv,
                   errors& errs) {
  auto it = state.find("extend");
  if (it == state.end()) return;
  json ext = std::move(*it);
  state.erase("extend");
  if (!ext.is_object()) {
    errs.push_back("Extension value in SLS '" + sls + "' is not a dictionary");
    return;
  }
  for (auto& [name, body] : ext.items()) {
    if (!body.is_object()) {
      errs.push_back("Extension name '" + name + "' in SLS '" + sls + "' is not a dictionary");
      continue;
    }
    if (!body.contains("__sls__")) body["__sls__"] = sls;
    if (!body.contains("__env__")) body["__env__"] = saltenv;
    std::vector<std::string> keys;
    for (const auto& [k, v] : body.items()) keys.push_back(k);
    for (const auto& key : keys) {
      if (starts_with(key, "_")) continue;
      if (!body[key].is_array()) continue;
      auto dot = key.find('.');
      if (dot == std::string::npos) continue;
      std::string comp0 = key.substr(0, dot);
      std::string rest = key.substr(dot + 1);
      std::string comp1 = rest.substr(0, rest.find('.'));
      json decl = std::move(body[key]);
      body.erase(key);
      decl.push_back(comp1);
      body[comp0] = std::move(decl);
    }
  }
  if (!state.contains("__extend__")) state["__extend__"] = json::array();
  state["__extend__"].push_back(std::move(ext));
}

void handle_exclude(json& state, const std::string& sls, const std::string&, errors& errs) {
  auto it = state.find("exclude");
  if (it == state.end()) return;
  json exc = std::move(*it);
  state.erase("exclude");
  if (!exc.is_array()) {
    errs.push_back("Exclude Declaration in SLS " + sls + " is not formed as a list");
  }
  if (!state.contains("__exclude__")) state["__exclude__"] = json::array();
  json& dest = state["__exclude__"];
  if (exc.is_array()) {
    for (auto& e : exc) dest.push_back(std::move(e));
  } else if (exc.is_object()) {
    for (const auto& [k, v] : exc.items()) dest.push_back(k);
  } else if (exc.is_string()) {
    for (char c : exc.get<std::string>()) dest.push_back(std::string(1, c));
  }
}

void handle_state_decls(json& state, const std::string& sls, const std::string& saltenv,
                        errors& errs) {
  for (auto& [name, body] : state.items()) {
    if (!body.is_object()) {
      if (name == "__extend__" || name == "__exclude__") continue;
      if (body.is_string()) {
        const std::string& s = body.get_ref<const std::string&>();
        auto dot = s.find('.');
        if (dot != std::string::npos) {
          std::string comp0 = s.substr(0, dot);
          std::string rest = s.substr(dot + 1);
          std::string comp1 = rest.substr(0, rest.find('.'));
          json padded = json::object();
          padded["__sls__"] = sls;
          padded["__env__"] = saltenv;
          padded[comp0] = json::array({comp1});
          body = std::move(padded);
          continue;
        }
      }
      errs.push_back("ID " + name + " in SLS " + sls + " is not a dictionary");
      continue;
    }
    std::set<std::string> skeys;
    std::vector<std::string> keys;
    for (const auto& [k, v] : body.items()) keys.push_back(k);
    for (const auto& key : keys) {
      if (starts_with(key, "_")) continue;
      if (!body[key].is_array()) continue;
      auto dot = key.find('.');
      if (dot != std::string::npos) {
        std::string comp0 = key.substr(0, dot);
        std::string rest = key.substr(dot + 1);
        std::string comp1 = rest.substr(0, rest.find('.'));
        if (skeys.contains(comp0)) {
          errs.push_back("ID '" + name + "' in SLS '" + sls +
                         "' contains multiple state declarations of the same type");
          continue;
        }
        json decl = std::move(body[key]);
        body.erase(key);
        decl.push_back(comp1);
        body[comp0] = std::move(decl);
        skeys.insert(comp0);
        continue;
      }
      skeys.insert(key);
    }
    if (!body.contains("__sls__")) body["__sls__"] = sls;
    if (!body.contains("__env__")) body["__env__"] = saltenv;
  }
}

void handle_iorder(json& state, int& next) {
  for (auto& [name, body] : state.items()) {
    if (!body.is_object()) continue;
    for (auto& [s_dec, decl] : body.items()) {
      if (!decl.is_array()) continue;
      if (starts_with(s_dec, "_")) continue;
      bool found = false;
      for (const auto& arg : decl) {
        if (arg.is_object() && !arg.empty() && first_key(arg) == "order") found = true;
      }
      if (!found) decl.push_back(json{{"order", next++}});
    }
  }
}

void merge_included_states(json& highstate, json& state, errors& errs) {
  if (auto e = state.find("__extend__"); e != state.end()) {
    json ext = std::move(*e);
    state.erase("__extend__");
    if (!highstate.contains("__extend__")) highstate["__extend__"] = json::array();
    if (ext.is_array()) {
      for (auto& x : ext) highstate["__extend__"].push_back(std::move(x));
    }
  }
  if (auto e = state.find("__exclude__"); e != state.end()) {
    json exc = std::move(*e);
    state.erase("__exclude__");
    if (!highstate.contains("__exclude__")) highstate["__exclude__"] = json::array();
    if (exc.is_array()) {
      for (auto& x : exc) highstate["__exclude__"].push_back(std::move(x));
    }
  }
  for (auto& [id, body] : state.items()) {
    auto h = highstate.find(id);
    if (h != highstate.end() && !py_equal(*h, body)) {
      auto field = [](const json& b, const char* k) {
        return b.is_object() && b.contains(k) ? py_str(b[k]) : std::string("None");
      };
      errs.push_back(
          "Detected conflicting IDs, SLS IDs need to be globally unique.\n    The conflicting "
          "ID is '" +
          id + "' and is found in SLS '" + field(*h, "__env__") + ":" + field(*h, "__sls__") +
          "' and SLS '" + field(body, "__env__") + ":" + field(body, "__sls__") + "'");
    }
  }
  for (auto& [id, body] : state.items()) highstate[id] = body;
}

void clean_duplicate_extends(json& highstate) {
  auto it = highstate.find("__extend__");
  if (it == highstate.end() || !it->is_array()) return;
  std::vector<std::pair<std::string, json>> seen;
  for (const auto& ext : *it) {
    if (!ext.is_object()) continue;
    for (const auto& item : ext.items()) {
      const std::string& k = item.key();
      const json& v = item.value();
      bool dup = std::any_of(seen.begin(), seen.end(), [&](const auto& p) {
        return p.first == k && py_equal(p.second, v);
      });
      if (!dup) seen.emplace_back(k, v);
    }
  }
  json out = json::array();
  for (auto& [k, v] : seen) out.push_back(json{{k, std::move(v)}});
  *it = std::move(out);
}

}  // namespace brine::state
