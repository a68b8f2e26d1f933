// Salt's service states: service.running, dead, enabled, disabled, masked,
// unmasked and mod_watch (what a watch or listen requisite runs: a restart,
// a reload or a start), through the service module's execution functions,
// so they work with whichever backend the module uses on this host
// (modules/service.h: systemd, or Debian's init.d scripts).

#include <algorithm>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <cctype>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/python_truth.h"
#include "modules/service.h"
#include "states/python_text.h"
#include "states/registry.h"

namespace brine::states {
namespace service_states {
namespace {

using plain_json = nlohmann::json;
using modules::service::backend;

// Salt's `enable`: True or False act (a string counts as its
// salt.utils.data.is_true), anything else (None, 1) leaves boot alone.
std::optional<bool> tri_state(const state_call& c, const char* key) {
  const json* v = c.arg(key);
  if (v == nullptr || v->is_null()) return std::nullopt;
  if (v->is_boolean()) return v->get<bool>();
  if (v->is_string()) {
    std::string s = v->get<std::string>();
    std::transform(s.begin(), s.end(), s.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    return s == "true";
  }
  return std::nullopt;
}

// Salt's _get_systemd_only: the systemd-only arguments (no_block, unmask,
// unmask_runtime) the low chunk gives and the function takes, passed where
// systemd runs. The init.d functions take none of them, so Salt warns of none.
plain_json systemd_kwargs(const state_call& c, const std::vector<std::string>& takes) {
  plain_json out = plain_json::object();
  if (modules::service::chosen() != backend::systemd) return out;
  for (const auto& key : takes) {
    if (const json* v = c.arg(key); v != nullptr) out[key] = plain_json::parse(v->dump());
  }
  return out;
}

const std::vector<std::string> k_start_args = {"no_block", "unmask", "unmask_runtime"};
const std::vector<std::string> k_stop_args = {"no_block"};

asio::awaitable<json> fn(state_call c, std::string fun, plain_json args,
                         plain_json kwargs = plain_json::object()) {
  json r = co_await c.run(std::move(fun), std::move(args), std::move(kwargs));
  co_return r;
}

asio::awaitable<bool> fn_bool(state_call c, std::string fun, plain_json args,
                              plain_json kwargs = plain_json::object()) {
  json r = co_await c.run(std::move(fun), std::move(args), std::move(kwargs));
  co_return base::python_truth(r);
}

// A sig of null is Salt's None.
plain_json name_and_sig(const std::string& name, const state_call& c) {
  plain_json args = plain_json::array({name});
  const json* sig = c.arg("sig");
  if (sig != nullptr && !sig->is_null()) args.push_back(plain_json::parse(sig->dump()));
  return args;
}

// Salt's `init_delay` (seconds, maybe fractional): a wait on the executor.
asio::awaitable<void> delay(json seconds) {
  double s = seconds.is_number() ? seconds.get<double>() : 0;
  if (s <= 0) co_return;
  asio::steady_timer t(co_await asio::this_coro::executor,
                       std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                           std::chrono::duration<double>(s)));
  co_await t.async_wait(asio::use_awaitable);
}

// Salt's _offline: systemd installed but not running (modules/service.h).
asio::awaitable<bool> offline(state_call c) {
  std::string fun = "service.offline";
  plain_json none = plain_json::array();
  bool off = co_await fn_bool(std::move(c), std::move(fun), std::move(none));
  co_return off;
}

void merge(json& ret, const json& part) {
  for (const auto& [k, v] : part.items()) ret[k] = v;
}

// Salt's _available: {} when the service exists, else the result and
// comment that say it does not.
asio::awaitable<json> unavailable(state_call c, std::string name) {
  std::string fun = "service.available";
  plain_json args = plain_json::array({name});
  bool avail = co_await fn_bool(c, std::move(fun), std::move(args));
  json part = json::object();
  if (!avail) {
    part["result"] = false;
    part["comment"] = "The named service " + name + " is not available";
  }
  co_return part;
}

// `started`: true, false, or nullopt (Salt's None: "in the desired state").
std::string enable_text(const std::string& name, std::optional<bool> started, const char* done,
                        bool has) {
  // done: "enabled"/"disabled"; has: "has been" vs "is already".
  const std::string head = "Service " + name + (has ? " has been " : " is already ") + done;
  if (!started) return head + ", and is in the desired state";
  return head + (*started ? ", and is running" : ", and is dead");
}

// The start Salt's _enable and _disable share: the part to merge where they
// end there (a missing service, one already `on` = enabled or disabled, a
// test run), else `settled` false and the part's result set.
struct boot_look {
  json part = json::object();
  bool settled = true;
};

asio::awaitable<boot_look> look_at_boot(state_call c, std::string name, std::optional<bool> started,
                                        bool result, bool on) {
  boot_look out;
  json& part = out.part;
  try {
    part = co_await unavailable(c, name);
    if (!part.empty()) {
      if (!on) part["result"] = true;
      co_return out;
    }
  } catch (const base::error& e) {
    part["result"] = false;
    part["comment"] = e.what();
    co_return out;
  }
  part["result"] = result;
  std::string is_set = on ? "service.enabled" : "service.disabled";
  const char* done = on ? "enabled" : "disabled";
  const plain_json args = plain_json::array({name});
  const bool already = co_await fn_bool(c, is_set, args);
  if (already) {
    if (!started) part["changes"] = json::object();
    part["comment"] = enable_text(name, started, done, false);
    co_return out;
  }
  if (c.test) {
    part["result"] = nullptr;
    part["comment"] = "Service " + name + " set to be " + done;
    co_return out;
  }
  out.settled = false;
  co_return out;
}

// Salt's _enable: what service.running/dead/enabled merge into their return.
asio::awaitable<json> enable(state_call c, std::string name, std::optional<bool> started,
                             bool result) {
  boot_look look = co_await look_at_boot(c, name, started, result, true);
  if (look.settled) co_return look.part;
  json part = std::move(look.part);
  std::string is_enabled = "service.enabled";
  const plain_json args = plain_json::array({name});
  std::string enable_error;
  try {
    std::string fun = "service.enable";
    plain_json kwargs = systemd_kwargs(c, k_start_args);
    bool done = co_await fn_bool(c, std::move(fun), args, std::move(kwargs));
    if (done) {
      part["changes"] = json::object();
      const bool after = co_await fn_bool(c, is_enabled, args);
      if (after) part["changes"][name] = true;  // it was not before
      part["comment"] = enable_text(name, started, "enabled", true);
      co_return part;
    }
  } catch (const base::error& e) {
    enable_error = e.what();
  }
  part["result"] = false;
  std::string comment = "Failed when setting service " + name + " to start at boot";
  if (!started) {
    comment += ", but the service was already running";
  } else {
    comment += *started ? ", but the service is running" : ", and the service is dead";
  }
  if (!enable_error.empty()) comment += ". Additional information follows:\n\n" + enable_error;
  part["comment"] = comment;
  co_return part;
}

// Salt's _disable.
asio::awaitable<json> disable(state_call c, std::string name, std::optional<bool> started,
                              bool result) {
  boot_look look = co_await look_at_boot(c, name, started, result, false);
  if (look.settled) co_return look.part;
  json part = std::move(look.part);
  std::string is_disabled = "service.disabled";
  const plain_json args = plain_json::array({name});
  bool done = false;
  try {
    std::string fun = "service.disable";
    plain_json kwargs = systemd_kwargs(c, k_stop_args);
    done = co_await fn_bool(c, std::move(fun), args, std::move(kwargs));
  } catch (const base::error&) {
    done = false;  // systemd's disable answers False where it fails (Salt)
  }
  if (done) {
    part["changes"] = json::object();
    const bool after = co_await fn_bool(c, is_disabled, args);
    if (after) part["changes"][name] = true;  // it was not before
    part["comment"] = enable_text(name, started, "disabled", true);
    co_return part;
  }
  part["result"] = false;
  std::string comment = "Failed when setting service " + name + " to not start";
  if (!started) {
    comment += " at boot, but the service was already running";
  } else {
    comment += *started ? " at boot, and is running" : " at boot, and the service is dead";
  }
  part["comment"] = comment;
  co_return part;
}

json enabled_used_error(json ret, const std::string& name) {
  ret["result"] = false;
  ret["comment"] = "Service " + name +
                   " uses non-existent option \"enabled\".  Perhaps \"enable\" option was "
                   "intended?";
  return ret;
}

std::string join_nonempty(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) {
    if (p.empty()) continue;
    out += (out.empty() ? "" : "\n") + p;
  }
  return out;
}

// Salt's masked/unmasked states; `mask` false is unmasked.
asio::awaitable<json> mask_state(state_call c, std::string name, bool runtime, bool mask) {
  json ret = make_ret(name, true, "");
  // Salt has service.masked where its systemd module loads: booted, or offline.
  bool has_masked = modules::service::chosen() == backend::systemd;
  if (!has_masked) has_masked = co_await offline(c);
  if (!has_masked) {
    ret["comment"] = "Service masking not available on this minion";
    ret["result"] = false;
    co_return ret;
  }
  const std::string mask_type = runtime ? "runtime masked" : "masked";
  const std::string action = mask ? mask_type : (runtime ? "runtime unmasked" : "unmasked");
  json expected = json::object();
  expected[mask_type] = json{{"old", !mask}, {"new", mask}};
  try {
    std::string masked_fun = "service.masked";
    plain_json args = plain_json::array({name, runtime});
    const bool before = co_await fn_bool(c, masked_fun, args);
    if (before == mask) {
      ret["comment"] = "Service " + name + (mask ? " is already " : " was already ") + action;
      co_return ret;
    }
    if (c.test) {
      ret["result"] = nullptr;
      ret["changes"] = expected;
      ret["comment"] = "Service " + name + " would be " + action;
      co_return ret;
    }
    std::string change_fun = mask ? "service.mask" : "service.unmask";
    co_await fn(c, std::move(change_fun), args);
    const bool after = co_await fn_bool(c, masked_fun, args);
    if (after == mask) {
      ret["changes"] = expected;
      ret["comment"] = "Service " + name + " was " + action;
    } else {
      ret["comment"] =
          std::string(mask ? "Failed to mask" : "Failed to unmask") + " service " + name;
    }
  } catch (const base::error& e) {
    ret["result"] = false;
    ret["comment"] = e.what();
  }
  co_return ret;
}

// What service.running and service.dead find before they act: where Salt
// ends early (the misspelt `enabled`, offline mode, a missing service) the
// state's answer, else whether the service runs and starts at boot.
struct service_look {
  std::optional<json> done;
  bool running = false;
  bool enabled = false;
};

// `would`: what a test run would have done to a missing service ("started");
// `missing_ok`: whether a missing service is success (service.dead).
asio::awaitable<service_look> look(state_call c, std::string would, bool missing_ok) {
  const std::string name = c.name();
  json ret = make_ret(name, true, "");
  service_look out;
  if (c.arg("enabled") != nullptr) {
    out.done = enabled_used_error(std::move(ret), name);
    co_return out;
  }
  const bool off = co_await offline(c);
  if (off) {
    ret["comment"] = "Running in OFFLINE mode. Nothing to do";
    out.done = std::move(ret);
    co_return out;
  }
  try {
    json part = co_await unavailable(c, name);
    if (!part.empty()) {
      merge(ret, part);
      if (c.test) {
        ret["result"] = nullptr;
        ret["comment"] = "Service " + name +
                         " not present; if created in this state run, it would have been " + would;
      } else if (missing_ok) {
        ret["result"] = true;  // a service that is not there is dead enough
      }
      out.done = std::move(ret);
      co_return out;
    }
  } catch (const base::error& e) {
    ret["result"] = false;
    ret["comment"] = e.what();
    out.done = std::move(ret);
    co_return out;
  }
  std::string status_fun = "service.status";
  std::string enabled_fun = "service.enabled";
  const plain_json with_sig = name_and_sig(name, c);
  const plain_json name_only = plain_json::array({name});
  out.running = co_await fn_bool(c, status_fun, with_sig);
  out.enabled = co_await fn_bool(c, enabled_fun, name_only);
  co_return out;
}

// Salt's `if enable is True: ret.update(_enable(...)) elif enable is False:
// ret.update(_disable(...))`: the part to merge, empty when `enable_to` is
// None.
asio::awaitable<json> boot(state_call c, std::string name, std::optional<bool> enable_to,
                           std::optional<bool> started, bool result) {
  json part = json::object();
  if (enable_to == true) {
    part = co_await enable(std::move(c), name, started, result);
  } else if (enable_to == false) {
    part = co_await disable(std::move(c), name, started, result);
  }
  co_return part;
}

// After a start or stop (and init_delay): the service's status as
// `status_args` asks it, and whether it or the boot setting moved (Salt then
// records the status as the change).
struct service_after {
  json status;
  bool moved = false;
};

asio::awaitable<service_after> status_after(state_call c, std::string name, plain_json status_args,
                                            service_look before) {
  const json* init_delay = c.arg("init_delay");
  if (init_delay != nullptr && base::python_truth(*init_delay)) co_await delay(*init_delay);
  std::string status_fun = "service.status";
  std::string enabled_fun = "service.enabled";
  const plain_json name_only = plain_json::array({name});
  service_after out;
  out.status = co_await fn(c, status_fun, std::move(status_args));
  const bool enabled_now = co_await fn_bool(c, enabled_fun, name_only);
  out.moved = before.enabled != enabled_now || before.running != base::python_truth(out.status);
  co_return out;
}

asio::awaitable<json> running(state_call c) {
  const std::string name = c.name();
  json ret = make_ret(name, true, "");
  const std::optional<bool> enable_to = tri_state(c, "enable");
  std::string would = "started";
  service_look before = co_await look(c, would, false);
  if (before.done) co_return *before.done;
  const plain_json name_only = plain_json::array({name});

  std::string unmask_comment;
  if (c.flag("unmask")) {
    const bool runtime = c.flag("unmask_runtime");
    json u = co_await mask_state(c, name, runtime, false);
    unmask_comment = u.value("comment", "");
  }

  if (before.running) {
    ret["comment"] = join_nonempty({"The service " + name + " is already running", unmask_comment});
    const std::optional<bool> change = enable_to == before.enabled ? std::nullopt : enable_to;
    json part = co_await boot(c, name, change, std::nullopt, true);
    merge(ret, part);
    co_return ret;
  }
  if (c.test) {
    ret["result"] = nullptr;
    ret["comment"] = join_nonempty({"Service " + name + " is set to start", unmask_comment});
    co_return ret;
  }

  bool started = false;
  try {
    std::string fun = "service.start";
    plain_json kwargs = systemd_kwargs(c, k_start_args);
    started = co_await fn_bool(c, std::move(fun), name_only, std::move(kwargs));
  } catch (const base::error& e) {
    ret["result"] = false;
    ret["comment"] = e.what();
    co_return ret;
  }
  if (!started) {
    ret["result"] = false;
    ret["comment"] = "Service " + name + " failed to start";
    json part = co_await boot(c, name, enable_to, false, false);
    merge(ret, part);
    co_return ret;
  }

  const plain_json with_sig = name_and_sig(name, c);
  service_after after = co_await status_after(c, name, with_sig, before);
  if (after.moved && ret["changes"].empty()) ret["changes"][name] = after.status;
  const bool now_running = base::python_truth(after.status);
  if (now_running) {
    ret["comment"] = "Started service " + name;
  } else {
    ret["comment"] = "Service " + name + " failed to start";
    ret["result"] = false;
  }
  json part = co_await boot(c, name, enable_to, now_running, now_running);
  merge(ret, part);
  const json* init_delay = c.arg("init_delay");
  if (init_delay != nullptr && base::python_truth(*init_delay)) {
    ret["comment"] = ret["comment"].get<std::string>() + "\nDelayed return for " +
                     py_text(*init_delay) + " seconds";
  }
  if (c.flag("unmask")) ret["comment"] = ret["comment"].get<std::string>() + "\n" + unmask_comment;
  co_return ret;
}

asio::awaitable<json> dead(state_call c) {
  const std::string name = c.name();
  json ret = make_ret(name, true, "");
  const std::optional<bool> enable_to = tri_state(c, "enable");
  std::string would = "stopped";
  service_look before = co_await look(c, would, true);
  if (before.done) co_return *before.done;
  const plain_json name_only = plain_json::array({name});

  if (!before.running) {
    ret["comment"] = "The service " + name + " is already dead";
    const std::optional<bool> change = enable_to == before.enabled ? std::nullopt : enable_to;
    json part = co_await boot(c, name, change, std::nullopt, true);
    merge(ret, part);
    co_return ret;
  }
  if (c.test) {
    ret["result"] = nullptr;
    ret["comment"] = "Service " + name + " is set to be killed";
    co_return ret;
  }

  bool stopped = false;
  try {
    std::string fun = "service.stop";
    plain_json kwargs = systemd_kwargs(c, k_stop_args);
    stopped = co_await fn_bool(c, std::move(fun), name_only, std::move(kwargs));
  } catch (const base::error&) {
    stopped = false;  // systemd's stop answers False where it fails (Salt)
  }
  if (!stopped) {
    ret["result"] = false;
    ret["comment"] = "Service " + name + " failed to die";
    json part = co_await boot(c, name, enable_to, true, false);
    merge(ret, part);
    co_return ret;
  }

  // Salt asks without sig here: the script's own status.
  service_after after = co_await status_after(c, name, name_only, before);
  if (after.moved && ret["changes"].empty()) ret["changes"][name] = after.status;
  const bool still_running = base::python_truth(after.status);
  if (still_running) {
    ret["result"] = false;
    ret["comment"] = "Service " + name + " failed to die";
  } else {
    ret["comment"] = "Service " + name + " was killed";
  }
  json part = co_await boot(c, name, enable_to, still_running, !still_running);
  merge(ret, part);
  co_return ret;
}

asio::awaitable<json> enabled(state_call c) {
  const std::string name = c.name();
  json ret = make_ret(name, true, "");
  {
    json part = co_await enable(c, name, std::nullopt, true);
    merge(ret, part);
  }
  if (c.test && ret["comment"] == "The named service " + name + " is not available") {
    ret["result"] = nullptr;
    ret["comment"] = "Service " + name +
                     " not present; if created in this state run, it would have been enabled";
  }
  co_return ret;
}

asio::awaitable<json> disabled(state_call c) {
  const std::string name = c.name();
  json ret = make_ret(name, true, "");
  {
    json part = co_await disable(c, name, std::nullopt, true);
    merge(ret, part);
  }
  co_return ret;
}

asio::awaitable<json> masked(state_call c) {
  const std::string name = c.name();
  const bool runtime = c.flag("runtime");
  co_return co_await mask_state(std::move(c), name, runtime, true);
}

asio::awaitable<json> unmasked(state_call c) {
  const std::string name = c.name();
  const bool runtime = c.flag("runtime");
  co_return co_await mask_state(std::move(c), name, runtime, false);
}

// Salt's mod_watch: for service.running a restart (reload: True a reload,
// with force: True a force-reload; full_restart needs a service.full_restart
// neither backend has), a start when it is not running; for service.dead a
// stop.
asio::awaitable<json> mod_watch(state_call c) {
  const std::string name = c.name();
  json ret = make_ret(name, true, "");
  const std::string sfun = c.low.value("sfun", "");
  std::string status_fun = "service.status";
  std::string func;
  std::string verb;
  std::string past;
  std::vector<std::string> takes = k_start_args;
  const plain_json name_only = plain_json::array({name});
  const plain_json with_sig = name_and_sig(name, c);
  if (sfun == "dead") {
    verb = "stop";
    past = "stopped";
    const bool up = co_await fn_bool(c, status_fun, with_sig);
    if (!up) {
      ret["comment"] = "Service is already " + past;
      co_return ret;
    }
    func = "service.stop";
    takes = k_stop_args;
  } else if (sfun == "running") {
    const bool up = co_await fn_bool(c, status_fun, with_sig);
    if (up) {
      if (c.flag("reload")) {
        if (c.flag("force")) {
          func = "service.force_reload";
          verb = "forcefully reload";
        } else {
          func = "service.reload";
          verb = "reload";
        }
      } else {
        func = "service.restart";
        verb = "restart";
      }
    } else {
      func = "service.start";
      verb = "start";
    }
    past = verb + "ed";
  } else {
    ret["comment"] = "Unable to trigger watch for service." + sfun;
    ret["result"] = false;
    co_return ret;
  }
  if (c.test) {
    ret["result"] = nullptr;
    ret["comment"] = "Service is set to be " + past;
    co_return ret;
  }
  if (verb == "start") {
    // Salt stops before it starts, whatever the stop answers.
    try {
      std::string stop_fun = "service.stop";
      co_await fn(c, std::move(stop_fun), name_only);
    } catch (const base::error&) {
    }
  }
  json result;
  try {
    plain_json kwargs = systemd_kwargs(c, takes);
    result = co_await fn(c, func, name_only, std::move(kwargs));
  } catch (const base::error& e) {
    ret["result"] = false;
    ret["comment"] = e.what();
    co_return ret;
  }
  const json* init_delay = c.arg("init_delay");
  if (init_delay != nullptr && base::python_truth(*init_delay)) co_await delay(*init_delay);
  ret["changes"] = json::object();
  ret["changes"][name] = result;
  ret["result"] = result;
  ret["comment"] = base::python_truth(result) ? "Service " + past : "Failed to " + verb + " the service";
  co_return ret;
}

}  // namespace
}  // namespace service_states

void register_service_states(registry& reg) {
  using namespace service_states;
  reg.add("service.running", running, {"name"},
          "service.running name=SERVICE [enable=None] [sig=] [init_delay=] [no_block=] [unmask=] "
          "[unmask_runtime=] [timeout=]: the service runs (started when it does not); enable "
          "True/False also sets whether it starts at boot. With watch, a change of a watched "
          "state restarts it (reload: True reloads, force: True force-reloads)");
  reg.add("service.dead", dead, {"name"},
          "service.dead name=SERVICE [enable=None] [sig=] [init_delay=] [no_block=]: the service "
          "does not run (stopped when it does); enable True/False also sets boot");
  reg.add("service.enabled", enabled, {"name"},
          "service.enabled name=SERVICE: the service starts at boot");
  reg.add("service.disabled", disabled, {"name"},
          "service.disabled name=SERVICE: the service does not start at boot");
  reg.add("service.masked", masked, {"name"},
          "service.masked name=SERVICE [runtime=False]: the unit is masked (systemd only)");
  reg.add("service.unmasked", unmasked, {"name"},
          "service.unmasked name=SERVICE [runtime=False]: the unit is not masked (systemd only)");
  reg.add("service.mod_watch", mod_watch, {"name"},
          "service.mod_watch: what a watch or listen requisite on service.running (restart, "
          "reload, or start) or service.dead (stop) runs");
}

}  // namespace brine::states
