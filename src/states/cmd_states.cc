// Salt's cmd states: cmd.run (with stateful), cmd.script, cmd.wait,
// cmd.wait_script and their mod_watch.
// Commands run through the execution function cmd.run_all, so a state's
// command is killed with its job like any other.

#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "base/error.h"
#include "fileserver/client.h"
#include "fileserver/path.h"
#include "modules/arguments.h"
#include "modules/context.h"
#include "modules/registry.h"
#include "states/registry.h"
#include "states/templates.h"

namespace brine::states {
namespace cmd_states {
namespace {

bool is_dir(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool is_true_text(const json& v) {
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) return v.get<double>() != 0;
  if (!v.is_string()) return false;
  std::string t = v.get<std::string>();
  for (auto& ch : t) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return t == "true" || t == "yes" || t == "1" || t == "on";
}

// Python's shlex.split of one line; nullopt where it raises ValueError.
std::optional<std::vector<std::string>> shlex_split(const std::string& line) {
  try {
    return modules::shlex_split("stateful output", line);
  } catch (const base::error&) {
    return std::nullopt;
  }
}

// Salt's _reinterpreted_state: a stateful command's output says what it did,
// as a JSON object or as a last line of name=value pairs (changed=yes|no,
// comment=..., anything else lands in changes).
json reinterpreted(json state) {
  json ret = state["changes"];
  state["changes"] = json::object();
  state["comment"] = "";
  std::string out = ret.is_object() ? ret.value("stdout", "") : "";
  if (out.empty()) {
    if (ret.is_object() && !ret.value("stderr", "").empty()) state["comment"] = ret["stderr"];
    return state;
  }
  json data = json::object();
  bool is_json = false;
  size_t idx = std::string::npos;
  try {
    data = json::parse(out);
    if (!data.is_object()) {
      state["result"] = false;
      state["comment"] = "script JSON output must be a JSON object (e.g., {})!";
      return state;
    }
    is_json = true;
  } catch (const json::exception&) {
    std::string trimmed = out;
    while (!trimmed.empty() && std::isspace(static_cast<unsigned char>(trimmed.back()))) {
      trimmed.pop_back();
    }
    idx = trimmed.rfind('\n');
    std::string line = idx == std::string::npos ? out : out.substr(idx + 1);
    data = json::object();
    auto items = shlex_split(line);
    bool ok = items.has_value();
    if (ok) {
      for (const auto& item : *items) {
        auto eq = item.find('=');
        if (eq == std::string::npos || item.find('=', eq + 1) != std::string::npos) {
          ok = false;
          break;
        }
        data[item.substr(0, eq)] = item.substr(eq + 1);
      }
    }
    if (!ok) {
      state["result"] = false;
      state["comment"] =
          "Failed parsing script output! Stdout must be JSON or a line of name=value pairs.";
      state["changes"].update(ret);
      return state;
    }
  }
  bool changed = is_true_text(data.value("changed", json("no")));
  if (data.contains("comment")) {
    state["comment"] = data["comment"];
    data.erase("comment");
  }
  if (changed) {
    for (auto& [k, v] : ret.items()) {
      if (!data.contains(k)) data[k] = v;
    }
    std::string stdout_text = data.value("stdout", "");
    data["stdout"] = is_json ? "" : stdout_text.substr(0, idx == std::string::npos ? 0 : idx);
    state["changes"] = data;
  }
  return state;
}

// The state's arguments `keys` that it has (and are not None), to the
// execution function as they are.
void pass_args(const state_call& c, nlohmann::json& kwargs,
               std::initializer_list<const char*> keys) {
  for (const char* key : keys) {
    if (const json* v = c.arg(key); v != nullptr && !v->is_null()) {
      kwargs[key] = nlohmann::json::parse(v->dump());
    }
  }
}

// runas= and umask= go to the command (Salt runs the state under umask and
// the command as runas; brine's minion is one process of many threads, so
// the umask is the child's alone).
void pass_identity(const state_call& c, nlohmann::json& kwargs) {
  pass_args(c, kwargs, {"runas", "umask"});
}

// Salt's stateful=[{test_name: COMMAND}]: what a test run runs instead
// ("" for none).
std::string stateful_test_name(const state_call& c) {
  if (const json* s = c.arg("stateful"); s != nullptr && s->is_array() && !s->empty() &&
                                         (*s)[0].is_object() && (*s)[0].contains("test_name")) {
    return (*s)[0]["test_name"].get<std::string>();
  }
  return "";
}

// env= that is neither a list nor a mapping.
bool bad_env(const state_call& c) {
  const json* env = c.arg("env");
  return env != nullptr && !env->is_null() && !env->is_array() && !env->is_object();
}

// cwd= where it names no directory ("" where it is fine or not given).
std::string missing_cwd(const state_call& c) {
  const json* cwd = c.arg("cwd");
  if (cwd != nullptr && cwd->is_string() && !cwd->get<std::string>().empty() &&
      !is_dir(cwd->get<std::string>())) {
    return cwd->get<std::string>();
  }
  return "";
}

// What the execution function answered, as the state's changes (`keys`, in
// Salt's order), or its error without Salt's "ERROR: " where it failed.
struct command_outcome {
  json changes = json::object();
  std::optional<std::string> error;
};

asio::awaitable<command_outcome> run_command(state_call c, modules::call run, std::string state_fun,
                                             std::vector<const char*> keys) {
  run.jid = c.jid;
  run.timeout = c.timeout;
  run.context = c.context;
  if (c.functions == nullptr) {
    throw base::error(state_fun + ": no execution functions to run it with");
  }
  modules::outcome o = co_await modules::execute(*c.functions, std::move(run));
  command_outcome out;
  if (!o.ret.is_object()) {
    std::string text = o.ret.is_string() ? o.ret.get<std::string>() : o.ret.dump();
    if (text.starts_with("ERROR: ")) text.erase(0, 7);
    out.error = text;
    co_return out;
  }
  for (const char* key : keys) {
    if (o.ret.contains(key)) out.changes[key] = json(o.ret[key]);
  }
  co_return out;
}

// The command's retcode after success_retcodes: those codes count as 0, and
// the changes say 0 (Salt's cmd.run_all rewrites the retcode).
int settled_retcode(const state_call& c, json& changes) {
  int retcode = changes.value("retcode", 1);
  if (const json* ok = c.arg("success_retcodes"); ok != nullptr && retcode != 0) {
    json codes = ok->is_array() ? *ok : json::array({*ok});
    for (const auto& code : codes) {
      if (code.is_number_integer() && code.get<int>() == retcode) {
        retcode = 0;
        changes["retcode"] = 0;
      }
    }
  }
  return retcode;
}

asio::awaitable<json> run(state_call c) {
  json ret = make_ret(c.name(), false, "");
  std::string name = c.name();
  bool stateful = c.flag("stateful");
  const std::string test_name = stateful_test_name(c);
  if (c.test && !test_name.empty()) name = test_name;
  if (bad_env(c)) {
    ret["comment"] = "Invalidly-formatted 'env' parameter. See documentation.";
    co_return ret;
  }
  if (c.test && test_name.empty()) {
    ret["result"] = nullptr;
    ret["comment"] = "Command \"" + name + "\" would have been executed";
    ret["changes"]["cmd"] = name;
    co_return stateful ? reinterpreted(ret) : ret;
  }
  if (std::string missing = missing_cwd(c); !missing.empty()) {
    ret["comment"] = "Desired working directory \"" + missing + "\" is not available";
    co_return ret;
  }
  for (const char* unsupported : {"root", "prepend_path"}) {
    if (const json* v = c.arg(unsupported); v != nullptr && !v->is_null()) {
      ret["comment"] = std::string("cmd.run: ") + unsupported + " is not supported by brine yet";
      co_return ret;
    }
  }
  modules::call run;
  run.fun = "cmd.run_all";
  run.kwargs = nlohmann::json::object();
  run.kwargs["cmd"] = name;
  pass_args(c, run.kwargs, {"cwd", "env", "timeout", "shell"});
  pass_identity(c, run.kwargs);
  std::string state_fun = "cmd.run";
  std::vector<const char*> keys = {"pid", "retcode", "stdout", "stderr"};
  command_outcome done = co_await run_command(c, std::move(run), state_fun, keys);
  if (done.error) {
    ret["comment"] = *done.error;
    co_return ret;
  }
  json all = std::move(done.changes);
  const int retcode = settled_retcode(c, all);
  ret["changes"] = all;
  ret["result"] = retcode == 0;
  ret["comment"] = "Command \"" + name + "\" run";
  if (stateful) ret = reinterpreted(ret);
  co_return ret;
}

// The saltenv of the state's sls (Salt's __env__), base outside one.
std::string saltenv_of(const state_call& c) {
  if (const json* e = c.arg("__env__"); e != nullptr && e->is_string() && !e->empty()) {
    return e->get<std::string>();
  }
  return "base";
}

// template: jinja over the script, as cp.get_template renders it (the
// state's defaults with context over them). Written to a temporary file the
// caller removes; "" and `error` set when it cannot be.
struct rendered_script {
  std::string path;
  std::string error;
};

asio::awaitable<rendered_script> render_script(state_call c, std::string source,
                                               std::string saltenv, json ctx) {
  rendered_script out;
  if (c.context == nullptr || c.functions == nullptr) {
    out.error = "template: jinja needs a minion";
    co_return out;
  }
  std::string local;
  if (auto u = fileserver::parse_url(source)) {
    auto checked = fileserver::check_path(u->path);
    std::vector<std::string> paths{checked.path};
    std::string env = u->saltenv.value_or(saltenv);
    if (!checked.error.empty()) co_return out;  // cache_error
    std::vector<fileserver::cached_file> got = co_await c.context->files().cache(env, std::move(paths));
    if (got.empty() || !got[0].error.empty()) co_return out;  // cache_error
    local = got[0].local;
  } else {
    local = source.starts_with("file://") ? source.substr(7) : source;
    struct stat st {};
    if (::stat(local.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) co_return out;
  }
  rendered_template r = co_await render_template_file(c, local, saltenv, std::move(ctx));
  if (!r.error.empty()) {
    out.error = r.error;
    co_return out;
  }
  std::string base_name = source.substr(source.rfind('/') + 1);
  std::string ext;
  if (auto dot = base_name.rfind('.'); dot != std::string::npos && dot != 0) ext = base_name.substr(dot);
  std::string pattern = "/tmp/__brine.tmpl.XXXXXX" + ext;
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  int fd = ::mkstemps(name.data(), static_cast<int>(ext.size()));
  if (fd < 0) {
    out.error = std::string("cannot create a temporary file in /tmp: ") + std::strerror(errno);
    co_return out;
  }
  const std::string& text = r.text;
  std::size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
  out.path = name.data();
  if (done < text.size()) {
    ::unlink(out.path.c_str());
    out.path.clear();
    out.error = "cannot write the rendered script";
  }
  co_return out;
}

struct unlink_on_exit {
  std::string path;
  ~unlink_on_exit() {
    if (!path.empty()) ::unlink(path.c_str());
  }
};

// Salt's cmd.script state: the script `source` (else name's first word) run
// through the execution function cmd.script with name's other words (or
// args=) as its arguments.
asio::awaitable<json> script(state_call c) {
  std::string name = c.name();
  bool stateful = c.flag("stateful");
  const std::string test_name = stateful_test_name(c);
  if (c.test && !test_name.empty()) name = test_name;
  json ret = make_ret(name, false, "");
  if (bad_env(c)) {
    ret["comment"] = "Invalidly-formatted 'env' parameter. See documentation.";
    co_return ret;
  }
  const json* context = c.arg("context");
  const json* defaults = c.arg("defaults");
  if (context != nullptr && c.flag("context") && !context->is_object()) {
    ret["comment"] = "Invalidly-formatted 'context' parameter. Must be formed as a dict.";
    co_return ret;
  }
  if (defaults != nullptr && c.flag("defaults") && !defaults->is_object()) {
    ret["comment"] = "Invalidly-formatted 'defaults' parameter. Must be formed as a dict.";
    co_return ret;
  }
  json ctx = json::object();
  if (defaults != nullptr && defaults->is_object()) ctx = *defaults;
  if (context != nullptr && context->is_object()) {
    for (const auto& [k, v] : context->items()) ctx[k] = v;
  }
  std::string source = name;
  if (const json* s = c.arg("source"); s != nullptr && !s->is_null()) {
    source = s->is_string() ? s->get<std::string>() : s->dump();
  }
  nlohmann::json args = nullptr;
  if (const json* a = c.arg("args"); a != nullptr && c.flag("args")) {
    args = nlohmann::json::parse(a->dump());
  } else if (auto sp = name.find(' '); sp != std::string::npos &&
                                      name.find_first_not_of(' ', sp) != std::string::npos) {
    // Salt: len(name.split()) > 1 gives args name.split(" ", 1)[1].
    args = name.substr(sp + 1);
  }
  if (c.test && test_name.empty()) {
    ret["result"] = nullptr;
    ret["comment"] = "Command '" + name + "' would have been executed";
    co_return stateful ? reinterpreted(ret) : ret;
  }
  if (std::string missing = missing_cwd(c); !missing.empty()) {
    ret["comment"] = "Desired working directory \"" + missing + "\" is not available";
    co_return ret;
  }
  const std::string saltenv = saltenv_of(c);
  nlohmann::json kwargs = nlohmann::json::object();
  unlink_on_exit rendered;
  std::string run_source = source;
  if (const json* t = c.arg("template"); t != nullptr && !t->is_null()) {
    std::string kind = t->is_string() ? t->get<std::string>() : t->dump();
    if (kind != "jinja") {
      ret["comment"] = "Attempted to render file paths with unavailable engine " + kind;
      co_return ret;
    }
    rendered_script r = co_await render_script(c, source, saltenv, ctx);
    if (!r.error.empty()) {
      ret["comment"] = r.error;
      co_return ret;
    }
    if (r.path.empty()) {
      kwargs["source"] = "";  // cache_error below
    } else {
      rendered.path = r.path;
      run_source = r.path;
    }
  }
  nlohmann::json call_args = nlohmann::json::array({run_source});
  if (!args.is_null()) kwargs["args"] = args;
  kwargs["saltenv"] = saltenv;
  pass_args(c, kwargs, {"cwd", "env", "timeout", "shell", "stdin"});
  pass_identity(c, kwargs);
  json all = json::object();
  if (kwargs.contains("source")) {
    kwargs.erase("source");
    all = json{{"pid", 0}, {"retcode", 1}, {"stdout", ""}, {"stderr", ""}, {"cache_error", true}};
  } else {
    modules::call run;
    run.fun = "cmd.script";
    run.args = std::move(call_args);
    run.kwargs = std::move(kwargs);
    std::string state_fun = "cmd.script";
    std::vector<const char*> keys = {"pid", "retcode", "stdout", "stderr", "cache_error"};
    command_outcome done = co_await run_command(c, std::move(run), state_fun, keys);
    if (done.error) {
      ret["comment"] = *done.error;
      co_return ret;
    }
    all = std::move(done.changes);
  }
  const int retcode = settled_retcode(c, all);
  ret["changes"] = all;
  ret["result"] = retcode == 0;
  if (all.value("cache_error", false)) {
    ret["comment"] = "Unable to cache script " + source + " from saltenv '" + saltenv + "'";
  } else {
    ret["comment"] = "Command '" + name + "' run";
  }
  if (stateful) ret = reinterpreted(ret);
  co_return ret;
}

asio::awaitable<json> wait(state_call c) { co_return make_ret(c.name(), true, ""); }

asio::awaitable<json> mod_watch(state_call c) {
  std::string sfun = c.low.value("sfun", "");
  if (sfun == "wait" || sfun == "run" || sfun == "watch") co_return co_await run(std::move(c));
  if (sfun == "wait_script" || sfun == "script") co_return co_await script(std::move(c));
  json ret = make_ret(c.name(), false, "");
  ret["comment"] = "cmd." + sfun +
                   " does not work with the watch requisite, please use cmd.wait or "
                   "cmd.wait_script";
  co_return ret;
}

}  // namespace
}  // namespace cmd_states

void register_cmd_states(registry& reg) {
  using namespace cmd_states;
  reg.add("cmd.run", run, {"name"},
          "cmd.run name=COMMAND [cwd=] [env=] [runas=] [umask=] [shell=] [timeout=] "
          "[stateful=False]: runs the command; "
          "its pid, retcode, stdout and stderr are the changes");
  reg.add("cmd.script", script, {"name"},
          "cmd.script name=SCRIPT [source=salt://|PATH] [args=] [template=jinja] [defaults=] "
          "[context=] [cwd=] [env=] [runas=] [umask=] [shell=] [timeout=] [stateful=False]: "
          "runs the script through cmd.script; its pid, retcode, stdout and stderr are the "
          "changes");
  reg.add("cmd.wait_script", wait, {"name"},
          "cmd.wait_script: cmd.script, only when a watch requisite fires");
  reg.add("cmd.wait", wait, {"name"},
          "cmd.wait name=COMMAND: runs the command only when a watch requisite fires");
  reg.add("cmd.mod_watch", mod_watch, {"name"},
          "cmd.mod_watch: what a watch requisite on cmd.run or cmd.wait runs");
}

}  // namespace brine::states
