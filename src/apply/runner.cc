#include "apply/runner.h"

#include <sys/stat.h>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <chrono>
#include <ctime>
#include <random>

#include "base/error.h"
#include "base/python_truth.h"
#include "fileserver/client.h"
#include "modules/context.h"
#include "modules/data.h"
#include "modules/registry.h"
#include "state/high.h"

namespace brine::apply {

namespace {

using clock = std::chrono::system_clock;

// The requisites Salt's State.call_chunk looks at, in its order.
const std::vector<std::string> k_requisites = {
    "require", "require_any", "watch", "watch_any", "prereq",
    "onfail",  "onfail_any",  "onchanges", "onchanges_any"};
// check_requisite's order of requisite types.
const std::vector<std::string> k_check_order = {
    "require", "require_any", "watch",      "watch_any", "prereq",        "onfail",
    "onfail_any", "onfail_all", "onchanges", "onchanges_any"};
// Salt's STATE_REQUISITE_KEYWORDS: what a listener's mod_watch chunk drops.
const std::vector<std::string> k_requisite_keywords = {
    "onchanges",  "onchanges_any", "onfail",      "onfail_any", "onfail_all", "onfail_stop",
    "prereq",     "prerequired",   "watch",       "watch_any",  "require",    "require_any",
    "listen"};

std::string text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  return state::py_str(v);
}

// Local time of day as Python's time().isoformat(): HH:MM:SS.ffffff.
std::string time_of_day(clock::time_point t) {
  auto secs = clock::to_time_t(t);
  struct tm tm {};
  ::localtime_r(&secs, &tm);
  auto micros = std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count() %
                1000000;
  char buf[32];
  if (micros == 0) {
    std::snprintf(buf, sizeof buf, "%02d:%02d:%02d", tm.tm_hour, tm.tm_min, tm.tm_sec);
  } else {
    std::snprintf(buf, sizeof buf, "%02d:%02d:%02d.%06lld", tm.tm_hour, tm.tm_min, tm.tm_sec,
                  static_cast<long long>(micros));
  }
  return buf;
}

// Milliseconds with microseconds, as Salt computes duration.
double millis(clock::duration d) {
  return static_cast<double>(std::chrono::duration_cast<std::chrono::microseconds>(d).count()) /
         1000.0;
}

// Salt's trim_req: {"file.managed": x} -> {"file": x}.
json trim_req(const json& req) {
  std::string key = req.begin().key();
  auto dot = key.find('.');
  if (dot == std::string::npos) return req;
  json out = json::object();
  out[key.substr(0, dot)] = req.begin().value();
  return out;
}

json as_req(const json& req) {
  if (req.is_string()) {
    json r = json::object();
    r["id"] = req;
    return trim_req(r);
  }
  if (req.is_object() && req.size() == 1) return trim_req(req);
  return json();
}

// chunk[key] as Python's str() shows it; empty when absent. Chunks come
// from whoever wrote the state tree (or called state.low): any key may hold
// any type (state_args_fuzz found `state: true` throwing here).
std::string field(const json& chunk, const char* key) {
  auto it = chunk.find(key);
  return it == chunk.end() ? std::string() : text(*it);
}

// Whether `chunk` is what a requisite {key: value} points at.
bool matches(const json& chunk, const std::string& key, const json& value) {
  if (!value.is_string()) return false;
  const std::string& pattern = value.get_ref<const std::string&>();
  if (key == "sls") return modules::fnmatch(pattern, field(chunk, "__sls__"));
  if (!(modules::fnmatch(pattern, field(chunk, "name")) ||
        modules::fnmatch(pattern, field(chunk, "__id__")))) {
    return false;
  }
  return key == "id" || field(chunk, "state") == key;
}

bool is_true(const json& v) { return v.is_boolean() && v.get<bool>(); }
bool is_false(const json& v) { return v.is_boolean() && !v.get<bool>(); }

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// A reply for a state that did not run (Salt's _calculate_fake_duration).
json fake(bool result, const std::string& comment, int run_num, const json& low,
          bool state_ran = true) {
  json r = json::object();
  r["changes"] = json::object();
  r["result"] = result;
  r["duration"] = 0.0;
  r["start_time"] = time_of_day(clock::now());
  r["comment"] = comment;
  if (!state_ran) r["__state_ran__"] = false;
  r["__run_num__"] = run_num;
  r["__sls__"] = low.value("__sls__", json());
  r["__id__"] = low.value("__id__", json());
  r["name"] = low.value("name", json());
  return r;
}

// A parallel state's return, filled when its coroutine ends.
struct proc {
  json ret;
  bool done = false;
  std::unique_ptr<asio::steady_timer> wake;
};

}  // namespace

std::string tag_of(const json& low) {
  return field(low, "state") + "_|-" + field(low, "__id__") + "_|-" + field(low, "name") + "_|-" +
         field(low, "fun");
}

bool any_failed(const json& running) {
  if (!running.is_object()) return true;
  for (const auto& [tag, ret] : running.items()) {
    if (ret.is_object() && is_false(ret.value("result", json(true)))) return true;
  }
  return false;
}

struct runner::impl {
  settings s;
  json chunks = json::array();
  json running = json::object();
  json pre = json::object();
  std::set<std::string> active;
  int run_num = 0;
  bool failhard_hit = false;
  std::map<std::string, std::shared_ptr<proc>> procs;
  // Shared by the sub-runs of listeners (call_listen), made per run.
  std::shared_ptr<states::run_data> per_run = std::make_shared<states::run_data>();

  // Salt's verify_data: the errors that keep a chunk from being called.
  std::vector<std::string> verify(const json& low) {
    std::vector<std::string> errs;
    if (!low.contains("state")) errs.push_back("Missing \"state\" data");
    if (!low.contains("fun")) errs.push_back("Missing \"fun\" data");
    if (!low.contains("name")) errs.push_back("Missing \"name\" data");
    if (!errs.empty()) return errs;
    std::string full = text(low["state"]) + "." + text(low["fun"]);
    const states::registry::entry* e = s.states->find(full);
    if (e == nullptr) {
      if (low.contains("__sls__")) {
        errs.push_back("State '" + full + "' was not found in SLS '" + text(low["__sls__"]) + "'");
        std::vector<std::string> dirs;
        if (s.context != nullptr) {
          std::string env = low.contains("__env__") ? text(low["__env__"]) : "base";
          dirs = s.context->files().dirs_of(env);
        }
        errs.push_back("Reason: " + states::missing_fun_string(full, *s.states, s.functions, dirs));
      } else {
        errs.push_back("Specified state '" + full + "' was not found");
      }
      return errs;
    }
    for (const auto& param : e->required) {
      if (!low.contains(param)) {
        errs.push_back("Missing parameter " + param + " for state " + full);
      }
    }
    return errs;
  }

  asio::awaitable<int> retcode_of(std::string command, json low) {
    // Named, not a temporary in the co_await expression (GCC 12 copies
    // those into the frame bitwise).
    states::state_call call = make_call(low, false);
    int rc = co_await call.retcode(std::move(command), std::move(low));
    co_return rc;
  }

  // An unless/onlyif entry of the form {fun: ..., args: [...], ...}: the
  // function's return (and its retcode) decide.
  asio::awaitable<std::pair<json, int>> check_function(json entry) {
    json get = entry.contains("get_return") ? entry["get_return"] : json();
    entry.erase("get_return");
    modules::call c;
    c.fun = text(entry["fun"]);
    entry.erase("fun");
    if (entry.contains("args")) {
      c.args = nlohmann::json(entry["args"]);
      entry.erase("args");
    }
    c.kwargs = nlohmann::json(entry);
    c.jid = s.jid;
    c.timeout = s.timeout;
    c.context = s.context;
    modules::outcome o = co_await modules::execute(*s.functions, std::move(c));
    json result = json(o.ret);
    // get_return: the part of the return that decides (Salt's traverse).
    if (get.is_string()) {
      const nlohmann::json* at = modules::traverse(o.ret, get.get<std::string>());
      result = at != nullptr ? json::parse(at->dump()) : json();
    }
    co_return std::pair<json, int>{std::move(result), o.success ? 0 : o.retcode};
  }

  // Salt's _run_check_onlyif / _unless / _creates, merged as _run_check.
  asio::awaitable<json> run_check(const json& low) {
    json ret = json::object();
    ret["result"] = false;
    ret["comment"] = json::array();
    // Salt's own order: what a skipped state returns names its sls and id
    // before skip_watch.
    ret["__sls__"] = low.value("__sls__", json());
    ret["__id__"] = low.value("__id__", json());
    if (low.contains("onlyif")) {
      json r = json::object();
      r["result"] = false;
      json list = low["onlyif"].is_array() ? low["onlyif"] : json::array({low["onlyif"]});
      auto check = [&](int code) {
        if (code != 0 && is_false(r["result"])) {
          r["comment"] = "onlyif condition is false";
          r["skip_watch"] = true;
          r["result"] = true;
          return false;
        }
        if (code == 0) {
          r["comment"] = "onlyif condition is true";
          r["result"] = false;
        }
        return true;
      };
      for (const auto& entry : list) {
        if (entry.is_string()) {
          if (!check(co_await retcode_of(entry.get<std::string>(), low))) break;
        } else if (entry.is_object()) {
          if (!entry.contains("fun")) {
            r["comment"] = "no `fun` argument in onlyif: " + state::py_str(entry);
            break;
          }
          auto [result, code] = co_await check_function(entry);
          if (code != 0) {
            if (!check(code)) break;
          } else if (!base::python_truth(result)) {
            r["comment"] = "onlyif condition is false";
            r["skip_watch"] = true;
            r["result"] = true;
            break;
          } else {
            r["comment"] = "onlyif condition is true";
            r["result"] = false;
          }
        } else {
          r["comment"] = "onlyif execution failed, bad type passed";
          r["result"] = false;
          break;
        }
      }
      ret["result"] = r["result"];
      ret["comment"].push_back(r.value("comment", json()));
      if (r.contains("skip_watch")) ret["skip_watch"] = r["skip_watch"];
    }
    if (low.contains("unless")) {
      json r = json::object();
      r["result"] = false;
      json list = low["unless"].is_array() ? low["unless"] : json::array({low["unless"]});
      auto check = [&](int code) {
        if (code == 0) {
          r["comment"] = "unless condition is true";
          r["skip_watch"] = true;
          r["result"] = true;
          return false;
        }
        r.erase("skip_watch");
        r["comment"] = "unless condition is false";
        r["result"] = false;
        return true;
      };
      for (const auto& entry : list) {
        if (entry.is_string()) {
          if (check(co_await retcode_of(entry.get<std::string>(), low))) break;
        } else if (entry.is_object()) {
          if (!entry.contains("fun")) {
            r["comment"] = "no `fun` argument in unless: " + state::py_str(entry);
            break;
          }
          auto [result, code] = co_await check_function(entry);
          if (code != 0) {
            if (check(code)) break;
          } else if (base::python_truth(result)) {
            r["comment"] = "unless condition is true";
            r["skip_watch"] = true;
            r["result"] = true;
          } else {
            r["comment"] = "unless condition is false";
            r["result"] = false;
            break;
          }
        } else {
          r["comment"] = "unless condition is false, bad type passed";
          r["result"] = false;
        }
      }
      ret["result"] = base::python_truth(r["result"]) || base::python_truth(ret["result"]);
      ret["comment"].push_back(r.value("comment", json()));
      if (r.contains("skip_watch")) {
        ret["skip_watch"] = base::python_truth(r["skip_watch"]) || base::python_truth(ret.value("skip_watch", json(false)));
      }
    }
    if (low.contains("creates")) {
      const json& c = low["creates"];
      json r = json::object();
      if (c.is_string() && exists(c.get<std::string>())) {
        r["comment"] = c.get<std::string>() + " exists";
        r["result"] = true;
        r["skip_watch"] = true;
      } else if (c.is_array() && std::all_of(c.begin(), c.end(), [](const json& p) {
                   return p.is_string() && exists(p.get<std::string>());
                 })) {
        r["comment"] = "All files in creates exist";
        r["result"] = true;
        r["skip_watch"] = true;
      } else {
        r["comment"] = "Creates files not found";
        r["result"] = false;
      }
      ret["result"] = base::python_truth(r["result"]) || base::python_truth(ret["result"]);
      ret["comment"].push_back(r["comment"]);
      if (r.contains("skip_watch")) {
        ret["skip_watch"] = base::python_truth(r["skip_watch"]) || base::python_truth(ret.value("skip_watch", json(false)));
      }
    }
    co_return ret;
  }

  // Salt's _run_check_cmd: check_cmd decides the result after the state ran.
  asio::awaitable<json> run_check_cmd(const json& low) {
    json r = json::object();
    r["result"] = false;
    json list = low["check_cmd"].is_array() ? low["check_cmd"] : json::array({low["check_cmd"]});
    for (const auto& entry : list) {
      int code = co_await retcode_of(text(entry), json::object());
      if (code == 0 && is_false(r["result"])) {
        r["comment"] = "check_cmd determined the state succeeded";
        r["result"] = true;
      } else if (code != 0) {
        r["comment"] = "check_cmd determined the state failed";
        r["result"] = false;
        break;
      }
    }
    co_return r;
  }

  states::state_call make_call(const json& low, bool test) const {
    states::state_call c;
    c.low = low;
    c.test = test;
    c.context = s.context;
    c.functions = s.functions;
    c.jid = s.jid;
    c.per_run = per_run.get();
    c.timeout = s.timeout;
    return c;
  }

  // The state function itself, its exceptions as Salt's "An exception
  // occurred in this state" return.
  asio::awaitable<json> invoke(const std::string& full, json low, bool test) {
    const states::registry::entry* e = s.states->find(full);
    std::string error;
    try {
      json ret = co_await e->fn(make_call(low, test));
      co_return ret;
    } catch (const std::exception& ex) {
      error = ex.what();
    }
    json ret = json::object();
    ret["result"] = false;
    ret["name"] = low.value("name", low.value("__id__", json()));
    ret["changes"] = json::object();
    ret["comment"] = "An exception occurred in this state: " + error;
    co_return ret;
  }

  // Salt's OutputUnifier: a list comment is joined with newlines, a result
  // that is not None is a bool.
  static void unify(json& ret) {
    if (ret.contains("comment") && ret["comment"].is_array()) {
      std::string joined;
      bool first = true;
      for (const auto& c : ret["comment"]) {
        if (!first) joined += "\n";
        first = false;
        joined += text(c);
      }
      ret["comment"] = joined;
    }
    if (ret.contains("result") && !ret["result"].is_null() && !ret["result"].is_boolean()) {
      ret["result"] = base::python_truth(ret["result"]);
    }
  }

  // Salt's State.call.
  asio::awaitable<json> call(json& low, int retries = 1) {
    auto started = clock::now();
    auto errs = verify(low);
    if (!errs.empty()) {
      json ret = json::object();
      ret["result"] = false;
      ret["name"] = low.value("name", json());
      ret["changes"] = json::object();
      std::string comment;
      for (const auto& e : errs) comment += e + "\n";
      ret["comment"] = comment;
      ret["__run_num__"] = run_num++;
      co_return ret;
    }
    json ret = json::object();
    ret["result"] = false;
    ret["name"] = low["name"];
    ret["changes"] = json::object();
    std::string full = text(low["state"]) + "." + text(low["fun"]);
    bool prereq = base::python_truth(low.value("__prereq__", json(false)));
    bool test = s.test || prereq;
    bool has_run_check = s.states->find(text(low["state"]) + ".mod_run_check") != nullptr;
    if ((low.contains("unless") || low.contains("onlyif") || low.contains("creates")) &&
        !has_run_check) {
      json check = co_await run_check(low);
      for (auto& [k, v] : check.items()) ret[k] = v;
    }
    std::shared_ptr<proc> parallel;
    if (!ret.contains("result") || is_false(ret["result"])) {
      if (!prereq && base::python_truth(low.value("parallel", json(false)))) {
        parallel = std::make_shared<proc>();
        parallel->wake = std::make_unique<asio::steady_timer>(
            co_await asio::this_coro::executor, std::chrono::steady_clock::time_point::max());
        json copy = low;
        auto self = this;
        auto began = clock::now();
        asio::co_spawn(
            co_await asio::this_coro::executor,
            [](impl* self, std::string full, json low, bool test, std::shared_ptr<proc> p,
               clock::time_point began) -> asio::awaitable<void> {
              json r = co_await self->invoke(full, std::move(low), test);
              unify(r);
              r["duration"] = millis(clock::now() - began);
              p->ret = std::move(r);
              p->done = true;
              p->wake->cancel();
            }(self, full, std::move(copy), test, parallel, began),
            asio::detached);
        ret = json::object();
        ret["name"] = low["name"];
        ret["result"] = nullptr;
        ret["changes"] = json::object();
        ret["comment"] = "Started in a separate process";
      } else {
        ret = co_await invoke(full, low, test);
      }
    }
    if (low.contains("check_cmd") &&
        s.states->find(text(low["state"]) + ".mod_run_check_cmd") == nullptr) {
      json check = co_await run_check_cmd(low);
      for (auto& [k, v] : check.items()) ret[k] = v;
    }
    unify(ret);
    if (prereq) {
      low["__prereq__"] = false;
      co_return ret;
    }
    ret["__sls__"] = low.value("__sls__", json());
    ret["__run_num__"] = run_num++;
    auto finished = clock::now();
    ret["start_time"] = time_of_day(started);
    ret["duration"] = millis(finished - started);
    ret["__id__"] = low["__id__"];
    if (parallel) {
      ret["__parallel__"] = true;
      procs[tag_of(low)] = parallel;
    }
    if (low.contains("retry")) {
      json retry = verify_retry(low["retry"]);
      low["retry"] = retry;
      if (!s.test) {
        if (!(ret["result"].is_boolean() && ret["result"].get<bool>() == retry["until"].get<bool>())) {
          if (retry["attempts"].get<int>() > retries) {
            int interval = retry["interval"].get<int>();
            if (retry["splay"].get<int>() != 0) {
              static thread_local std::mt19937 gen{std::random_device{}()};
              interval += std::uniform_int_distribution<int>(0, retry["splay"].get<int>())(gen);
            }
            asio::steady_timer t(co_await asio::this_coro::executor, std::chrono::seconds(interval));
            asio::error_code ec;
            co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
            json orig = ret;
            ret = co_await call(low, retries + 1);
            std::string prev = text(ret.value("comment", json("")));
            ret["comment"] = "Attempt " + std::to_string(retries) + ": Returned a result of \"" +
                             state::py_str(orig["result"]) + "\", with the following comment: \"" +
                             text(orig["comment"]) + "\"\n" + prev;
            ret["duration"] = ret["duration"].get<double>() + orig["duration"].get<double>() +
                              interval * 1000.0;
            if (retries == 1) ret["start_time"] = orig["start_time"];
          }
        }
      } else {
        std::string prev = text(ret.value("comment", json("")));
        ret["comment"] = prev + "  The state would be retried every " +
                         std::to_string(retry["interval"].get<int>()) +
                         " seconds (with a splay of up to " +
                         std::to_string(retry["splay"].get<int>()) + " seconds) a maximum of " +
                         std::to_string(retry["attempts"].get<int>()) +
                         " times or until a result of " + state::py_str(retry["until"]) +
                         " is returned";
      }
    }
    co_return ret;
  }

  static json verify_retry(const json& data) {
    json out = json::object();
    out["until"] = true;
    out["attempts"] = 2;
    out["interval"] = 30;
    out["splay"] = 0;
    if (!data.is_object()) return out;
    if (data.contains("until") && data["until"].is_boolean()) out["until"] = data["until"];
    for (const char* key : {"attempts", "interval", "splay"}) {
      if (data.contains(key) && data[key].is_number_integer()) out[key] = data[key];
    }
    return out;
  }

  // Awaits the parallel states among `tags` (Salt's reconcile_procs, which
  // waits by polling; here each one's end wakes us).
  asio::awaitable<void> reconcile(json& run_dict, const std::vector<std::string>& tags) {
    for (const auto& tag : tags) {
      auto it = procs.find(tag);
      if (it == procs.end() || !run_dict.contains(tag)) continue;
      auto p = it->second;
      if (!p->done) {
        asio::error_code ec;
        co_await p->wake->async_wait(asio::redirect_error(asio::use_awaitable, ec));
      }
      if (!p->done) continue;
      for (auto& [k, v] : p->ret.items()) run_dict[tag][k] = v;
      procs.erase(tag);
    }
  }

  asio::awaitable<void> reconcile_all() {
    std::vector<std::string> tags;
    for (const auto& [tag, p] : procs) tags.push_back(tag);
    co_await reconcile(running, tags);
  }

  // Salt's check_requisite: the status and the chunks of each requisite type.
  asio::awaitable<std::pair<std::string, std::map<std::string, std::vector<size_t>>>>
  check_requisite(json& low, bool with_prerequired) {
    std::map<std::string, std::vector<size_t>> reqs;
    bool present = false;
    std::string state_name = text(low["state"]);
    bool has_watch = s.states->find(state_name + ".mod_watch") != nullptr;
    for (auto [watch, require] : {std::pair{"watch", "require"}, std::pair{"watch_any", "require_any"}}) {
      if (!low.contains(watch)) continue;
      if (!has_watch) {
        json moved = low[watch];
        low.erase(watch);
        if (low.contains(require) && low[require].is_array()) {
          for (auto& r : moved) low[require].push_back(r);
        } else {
          low[require] = moved;
        }
      } else {
        present = true;
      }
    }
    for (const char* r : {"require", "require_any", "prerequired", "prereq", "onfail",
                          "onfail_any", "onfail_all", "onchanges", "onchanges_any"}) {
      if (low.contains(r)) present = true;
    }
    if (!present) co_return std::pair{std::string("met"), reqs};
    std::vector<std::string> order = k_check_order;
    if (with_prerequired) order.push_back("prerequired");
    for (const auto& r_state : order) reqs[r_state];
    for (const auto& r_state : order) {
      if (!low.contains(r_state) || low[r_state].is_null()) continue;
      for (const auto& raw : low[r_state]) {
        json req = as_req(raw);
        if (req.is_null()) continue;
        std::string key = req.begin().key();
        const json& value = req.begin().value();
        bool found = false;
        for (size_t i = 0; i < chunks.size(); ++i) {
          if (value.is_null()) continue;
          if (!value.is_string()) {
            throw base::error("Could not locate requisite of [" + key +
                              "] present in state with name [" + text(chunks[i]["name"]) + "]");
          }
          if (matches(chunks[i], key, value)) {
            found = true;
            reqs[r_state].push_back(i);
          }
        }
        if (!found) co_return std::pair{std::string("unmet"), std::map<std::string, std::vector<size_t>>{}};
      }
    }
    std::set<std::string> fun_stats;
    for (const auto& r_state : order) {
      const auto& idxs = reqs[r_state];
      std::set<std::string> req_stats;
      bool use_pre = r_state.starts_with("prereq") && !r_state.starts_with("prerequired");
      json& run_dict = use_pre ? pre : running;
      std::vector<std::string> tags;
      for (size_t i : idxs) tags.push_back(tag_of(chunks[i]));
      co_await reconcile(run_dict, tags);
      for (const auto& tag : tags) {
        if (!run_dict.contains(tag)) {
          req_stats.insert("unmet");
          continue;
        }
        const json& r = run_dict[tag];
        const json result = r.value("result", json());
        if (r_state.starts_with("onfail")) {
          if (is_true(result)) {
            req_stats.insert("onfail");
            continue;
          }
        } else if (is_false(result)) {
          req_stats.insert("fail");
          continue;
        }
        if (r_state.starts_with("onchanges")) {
          req_stats.insert(base::python_truth(r.value("changes", json())) ? "onchangesmet" : "onchanges");
          continue;
        }
        if (r_state.starts_with("watch") && base::python_truth(r.value("changes", json()))) {
          req_stats.insert("change");
          continue;
        }
        bool prereq_type = r_state.starts_with("prereq") && !r_state.starts_with("prerequired");
        if (r_state.starts_with("prereq") && result.is_null() && prereq_type) {
          req_stats.insert("premet");
        }
        if (r_state.starts_with("prereq") && !result.is_null()) {
          if (prereq_type) req_stats.insert("pre");
        } else if (base::python_truth(r.value("__state_ran__", json(true)))) {
          req_stats.insert("met");
        }
      }
      if (r_state.ends_with("_any") || r_state == "onfail") {
        if (req_stats.count("met") || req_stats.count("change")) req_stats.erase("fail");
        if (req_stats.count("onchangesmet")) {
          req_stats.erase("onchanges");
          req_stats.erase("fail");
        }
        if (req_stats.count("onfail") && req_stats.count("met")) req_stats.erase("onfail");
      }
      if (r_state.ends_with("_all")) {
        if (req_stats.count("onfail") && req_stats.count("met")) req_stats.erase("met");
      }
      fun_stats.insert(req_stats.begin(), req_stats.end());
    }
    std::string status;
    if (fun_stats.count("unmet")) {
      status = "unmet";
    } else if (fun_stats.count("fail")) {
      status = "fail";
    } else if (fun_stats.count("pre")) {
      status = fun_stats.count("premet") ? "met" : "pre";
    } else if (fun_stats.count("onfail") && !fun_stats.count("onchangesmet")) {
      status = "onfail";
    } else if (fun_stats.count("onchanges") && !fun_stats.count("onchangesmet")) {
      status = "onchanges";
    } else if (fun_stats.count("change")) {
      status = "change";
    } else if (fun_stats.count("onfail")) {
      status = "onfail";
    } else {
      status = "met";
    }
    co_return std::pair{status, reqs};
  }

  bool check_failhard(const json& low) {
    if (s.test) return false;
    std::string tag = tag_of(low);
    bool failhard = low.contains("failhard") ? base::python_truth(low["failhard"]) : s.failhard;
    if (failhard && running.contains(tag)) {
      const json& result = running[tag].value("result", json());
      if (result.is_null()) return false;
      return !base::python_truth(result);
    }
    return false;
  }

  // Salt's return for a chunk caught in a requisite loop (this run number,
  // not taken).
  json recursive_requisite(const json& low) const {
    json r = json::object();
    r["changes"] = json::object();
    r["result"] = false;
    r["comment"] = "Recursive requisite found";
    r["__run_num__"] = run_num;
    r["__sls__"] = low.value("__sls__", json());
    r["__id__"] = low.value("__id__", json());
    r["name"] = low.value("name", json());
    return r;
  }

  // Salt's State.call_chunk on chunks[index]; `depth` counts how often it
  // came back to the same chunk after running its requisites (Salt gives up
  // at 20: a prereq whose target lacks the matching prerequired never gets
  // further, as in a hand-written state.low list).
  asio::awaitable<void> call_chunk(size_t index, int depth = 0) {
    json& low = chunks[index];
    std::string tag = tag_of(low);
    if (!base::python_truth(low.value("prerequired", json(false)))) active.insert(tag);
    std::vector<std::string> requisites = k_requisites;
    bool in_prereq = base::python_truth(low.value("__prereq__", json(false)));
    std::string status;
    std::map<std::string, std::vector<size_t>> reqs;
    if (!in_prereq) {
      requisites.push_back("prerequired");
      std::tie(status, reqs) = co_await check_requisite(low, true);
    } else {
      std::tie(status, reqs) = co_await check_requisite(low, false);
    }
    if (status == "unmet") {
      std::vector<std::pair<std::string, std::vector<json>>> lost;
      std::vector<size_t> found_reqs;
      bool any_lost = false;
      for (const auto& requisite : requisites) {
        lost.push_back({requisite, {}});
        if (!low.contains(requisite)) continue;
        // A copy: marking a chunk __prereq__ below may add a key to `low`
        // itself (a state that names itself), which moves its values.
        const json listed = low[requisite];
        for (const auto& raw : listed) {
          json req = as_req(raw);
          if (req.is_null()) continue;
          std::string key = req.begin().key();
          const json& value = req.begin().value();
          bool found = false;
          for (size_t i = 0; i < chunks.size(); ++i) {
            if (value.is_null()) continue;
            if (key == "sls") {
              if (modules::fnmatch(text(value), field(chunks[i], "__sls__"))) {
                if (requisite == "prereq") chunks[i]["__prereq__"] = true;
                found_reqs.push_back(i);
                found = true;
              }
              continue;
            }
            if (matches(chunks[i], key, value)) {
              if (requisite == "prereq") {
                chunks[i]["__prereq__"] = true;
              } else if (requisite == "prerequired") {
                chunks[i]["__prerequired__"] = true;
              }
              found_reqs.push_back(i);
              found = true;
            }
          }
          if (!found) {
            lost.back().second.push_back(req);
            any_lost = true;
          }
        }
      }
      if (any_lost) {
        std::string comment = "The following requisites were not found:\n";
        for (const auto& [requisite, lreqs] : lost) {
          if (lreqs.empty()) continue;
          comment += std::string(19, ' ') + requisite + ":\n";
          for (const auto& l : lreqs) {
            comment += std::string(23, ' ') + l.begin().key() + ": " + text(l.begin().value()) + "\n";
          }
        }
        json& run_dict = base::python_truth(low.value("__prereq__", json(false))) ? pre : running;
        run_dict[tag] = fake(false, comment, run_num++, low);
        co_return;
      }
      for (size_t ci : found_reqs) {
        std::string ctag = tag_of(chunks[ci]);
        if (running.contains(ctag)) continue;
        if (active.count(ctag)) {
          if (base::python_truth(chunks[ci].value("__prerequired__", json(false)))) {
            if (!pre.contains(tag)) {
              low["__prereq__"] = true;
              pre[ctag] = co_await call(low);
            }
            co_return;
          }
          if (!running.contains(ctag)) running[tag] = recursive_requisite(low);
          ++run_num;
          co_return;
        }
        co_await call_chunk(ci);
        if (check_failhard(chunks[ci])) {
          failhard_hit = true;
          co_return;
        }
      }
      json& again = chunks[index];
      if (base::python_truth(again.value("__prereq__", json(false)))) {
        auto [st, rq] = co_await check_requisite(again, false);
        pre[tag] = co_await call(again);
        if (!base::python_truth(pre[tag].value("changes", json())) && st == "change") {
          json w = json::object();
          w["watch"] = "watch";
          pre[tag]["changes"] = w;
          pre[tag]["result"] = nullptr;
        }
      } else if (++depth >= 20) {
        running[tag] = recursive_requisite(again);
      } else {
        co_await call_chunk(index, depth);
      }
      if (!found_reqs.empty() && check_failhard(chunks[found_reqs.back()])) {
        failhard_hit = true;
      }
      co_return;
    }
    if (status == "met") {
      if (in_prereq) {
        pre[tag] = co_await call(low);
      } else {
        running[tag] = co_await call(low);
      }
    } else if (status == "fail") {
      if (pre.contains(tag)) {
        running[tag] = pre[tag];
        running[tag]["__run_num__"] = run_num;
        running[tag]["__sls__"] = low.value("__sls__", json());
      } else {
        // Salt collects the failed requisites in a set: sorted here, so the
        // comment does not depend on hashing.
        std::set<std::string> failed;
        for (const auto& [r_state, idxs] : reqs) {
          for (size_t i : idxs) {
            std::string rtag = tag_of(chunks[i]);
            const json* r = pre.contains(rtag) ? &pre[rtag]
                            : running.contains(rtag) ? &running[rtag] : nullptr;
            if (r == nullptr) continue;
            if (is_false(r->value("result", json()))) {
              failed.insert(text(chunks[i].value("__sls__", json())) + "." +
                            text(chunks[i]["__id__"]));
            }
          }
        }
        std::string list;
        for (const auto& f : failed) list += (list.empty() ? "" : ", ") + f;
        running[tag] = fake(false, "One or more requisite failed: " + list, run_num, low);
        pre[tag] = running[tag];
      }
      ++run_num;
    } else if (status == "change" && !in_prereq) {
      json ret = co_await call(low);
      if (!base::python_truth(ret.value("changes", json())) && !base::python_truth(ret.value("skip_watch", json(false)))) {
        json watcher = low;
        watcher["sfun"] = low["fun"];
        watcher["fun"] = "mod_watch";
        // Salt's __reqs__: the requisites by type; for the watch ones, a
        // state module's mod_watch may ask which of them changed.
        json reqs_low = json::object();
        for (const auto& [r_state, idxs] : reqs) {
          json list = json::array();
          for (size_t i : idxs) {
            json r = json::object();
            r["state"] = chunks[i]["state"];
            r["__id__"] = chunks[i]["__id__"];
            std::string rtag = tag_of(chunks[i]);
            r["__changed__"] = running.contains(rtag) && base::python_truth(running[rtag].value("changes", json()));
            list.push_back(std::move(r));
          }
          reqs_low[r_state] = std::move(list);
        }
        watcher["__reqs__"] = std::move(reqs_low);
        ret = co_await call(watcher);
      }
      running[tag] = ret;
    } else if (status == "pre") {
      json r = fake(true, "No changes detected", run_num++, low);
      running[tag] = r;
      pre[tag] = r;
    } else if (status == "onfail") {
      running[tag] =
          fake(true, "State was not run because onfail req did not change", run_num++, low, false);
    } else if (status == "onchanges") {
      running[tag] = fake(true, "State was not run because none of the onchanges reqs changed",
                          run_num++, low, false);
    } else {
      if (in_prereq) {
        pre[tag] = co_await call(low);
      } else {
        running[tag] = co_await call(low);
      }
    }
  }

  asio::awaitable<void> call_chunks() {
    for (size_t i = 0; i < chunks.size(); ++i) {
      if (failhard_hit) break;
      std::string tag = tag_of(chunks[i]);
      if (!running.contains(tag)) {
        co_await call_chunk(i);
        if (failhard_hit || check_failhard(chunks[i])) {
          failhard_hit = true;
          break;
        }
      }
      active.clear();
    }
    co_await reconcile_all();
  }

  // Salt's call_listen: mod_watch of every listened-to state that changed,
  // run after everything else.
  asio::awaitable<void> call_listen() {
    struct cref {
      std::string state, id, name;
      size_t index;
    };
    std::vector<cref> crefs;
    for (size_t i = 0; i < chunks.size(); ++i) {
      crefs.push_back({text(chunks[i]["state"]), text(chunks[i]["__id__"]),
                       text(chunks[i]["name"]), i});
    }
    auto in_cref = [](const cref& c, const std::string& state, const std::string& v) {
      return state == c.state && (v == c.state || v == c.id || v == c.name);
    };
    struct listener {
      std::string state, id;  // who listens (for _in: a lookup key)
      json targets;           // list of requisites it listens to
    };
    std::vector<listener> listeners;
    for (const auto& chunk : chunks) {
      if (chunk.contains("listen")) {
        listeners.push_back({text(chunk["state"]), text(chunk["__id__"]), chunk["listen"]});
      }
      if (chunk.contains("listen_in")) {
        for (const auto& l_in : chunk["listen_in"]) {
          if (!l_in.is_object()) continue;
          for (const auto& [k, v] : l_in.items()) {
            json target = json::object();
            target[text(chunk["state"])] = chunk["__id__"];
            listeners.push_back({k, text(v), json::array({target})});
          }
        }
      }
    }
    json watchers = json::array();
    json errors = json::object();
    auto error = [&](const std::string& state, const std::string& id) {
      json e = json::object();
      e["comment"] = "Referenced state " + state + ": " + id + " does not exist";
      e["name"] = "listen_" + state + ":" + id;
      e["result"] = false;
      e["changes"] = json::object();
      errors["Listen_Error_|-listen_" + id + "_|-listen_" + state + "_|-Listen_Error"] = e;
    };
    for (const auto& l : listeners) {
      for (json listen_to : l.targets) {
        if (!listen_to.is_object()) {
          bool found = false;
          for (const auto& chunk : chunks) {
            if (text(chunk["__id__"]) == text(listen_to) || text(chunk["name"]) == text(listen_to)) {
              json t = json::object();
              t[text(chunk["state"])] = chunk["__id__"];
              listen_to = t;
              found = true;
            }
          }
          if (!found) continue;
        }
        for (const auto& item : listen_to.items()) {
          const std::string& lkey = item.key();
          std::string lval = text(item.value());
          bool known = std::any_of(crefs.begin(), crefs.end(),
                                   [&](const cref& c) { return in_cref(c, lkey, lval); });
          if (!known) {
            error(lkey, lval);
            continue;
          }
          for (const auto& c : crefs) {
            if (!in_cref(c, lkey, lval)) continue;
            std::string to_tag = tag_of(chunks[c.index]);
            if (!running.contains(to_tag) || !base::python_truth(running[to_tag].value("changes", json()))) {
              continue;
            }
            bool listener_known = std::any_of(crefs.begin(), crefs.end(), [&](const cref& x) {
              return in_cref(x, l.state, l.id);
            });
            if (!listener_known) {
              error(l.state, l.id);
              continue;
            }
            for (const auto& x : crefs) {
              if (!in_cref(x, l.state, l.id)) continue;
              json w = chunks[x.index];
              w["sfun"] = w["fun"];
              w["fun"] = "mod_watch";
              w["__id__"] = "listener_" + text(w["__id__"]);
              for (const auto& r : k_requisite_keywords) w.erase(r);
              watchers.push_back(std::move(w));
            }
          }
        }
      }
    }
    if (!watchers.empty()) {
      impl sub{s};
      sub.per_run = per_run;
      sub.chunks = std::move(watchers);
      sub.run_num = run_num;
      co_await sub.call_chunks();
      run_num = sub.run_num;
      for (auto& [k, v] : sub.running.items()) running[k] = std::move(v);
    }
    for (auto& [k, v] : errors.items()) {
      v["__run_num__"] = run_num++;
      running[k] = std::move(v);
    }
  }
};

runner::runner(settings s) : p_(std::make_unique<impl>()) {
  if (s.states == nullptr || s.functions == nullptr) {
    throw base::error("state runner: no state or execution functions to run with");
  }
  p_->per_run->compiler = s.compiler;
  p_->s = std::move(s);
}

runner::~runner() = default;

asio::awaitable<json> runner::run(json chunks) {
  p_->chunks = std::move(chunks);
  p_->per_run->lowstate = &p_->chunks;
  p_->running = json::object();
  co_await p_->call_chunks();
  co_await p_->call_listen();
  co_return std::move(p_->running);
}

asio::awaitable<json> runner::run_id(json chunks, std::string id) {
  p_->chunks = std::move(chunks);
  p_->per_run->lowstate = &p_->chunks;
  json out = json::object();
  for (size_t i = 0; i < p_->chunks.size(); ++i) {
    if (p_->chunks[i].value("__id__", json()) != json(id)) continue;
    p_->running = json::object();
    p_->active.clear();
    co_await p_->call_chunk(i);
    co_await p_->reconcile_all();
    for (auto& [k, v] : p_->running.items()) out[k] = std::move(v);
  }
  co_return out;
}

asio::awaitable<json> runner::run_single(json low) {
  auto errs = p_->verify(low);
  if (!errs.empty()) co_return json(errs);
  p_->chunks = json::array({std::move(low)});
  p_->per_run->lowstate = &p_->chunks;
  std::string tag = tag_of(p_->chunks[0]);
  p_->running[tag] = co_await p_->call(p_->chunks[0]);
  co_await p_->reconcile_all();
  co_return std::move(p_->running);
}

}  // namespace brine::apply
