// Salt's cmd states: cmd.run (with stateful), cmd.wait and their mod_watch.
// Commands run through the execution function cmd.run_all, so a state's
// command is killed with its job like any other.

#include <sys/stat.h>

#include <cctype>
#include <optional>

#include "base/error.h"
#include "modules/registry.h"
#include "states/registry.h"

namespace brine::states {
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

// Python's shlex.split of one line; nullopt for an unclosed quote.
std::optional<std::vector<std::string>> shlex_split(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool have = false;
  char quote = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    char ch = line[i];
    if (quote) {
      if (ch == quote) {
        quote = 0;
      } else if (quote == '"' && ch == '\\' && i + 1 < line.size() &&
                 (line[i + 1] == '"' || line[i + 1] == '\\')) {
        cur += line[++i];
      } else {
        cur += ch;
      }
    } else if (ch == '\'' || ch == '"') {
      quote = ch;
      have = true;
    } else if (ch == '\\' && i + 1 < line.size()) {
      cur += line[++i];
      have = true;
    } else if (std::isspace(static_cast<unsigned char>(ch))) {
      if (have) out.push_back(cur);
      cur.clear();
      have = false;
    } else {
      cur += ch;
      have = true;
    }
  }
  if (quote) return std::nullopt;
  if (have) out.push_back(cur);
  return out;
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

asio::awaitable<json> run(state_call c) {
  json ret = make_ret(c.name(), false, "");
  std::string name = c.name();
  bool stateful = c.flag("stateful");
  std::string test_name;
  if (const json* s = c.arg("stateful");
      s != nullptr && s->is_array() && !s->empty() && (*s)[0].is_object() &&
      (*s)[0].contains("test_name")) {
    test_name = (*s)[0]["test_name"].get<std::string>();
  }
  if (c.test && !test_name.empty()) name = test_name;
  if (const json* env = c.arg("env");
      env != nullptr && !env->is_null() && !env->is_array() && !env->is_object()) {
    ret["comment"] = "Invalidly-formatted 'env' parameter. See documentation.";
    co_return ret;
  }
  if (c.test && test_name.empty()) {
    ret["result"] = nullptr;
    ret["comment"] = "Command \"" + name + "\" would have been executed";
    ret["changes"]["cmd"] = name;
    co_return stateful ? reinterpreted(ret) : ret;
  }
  const json* cwd = c.arg("cwd");
  if (cwd != nullptr && cwd->is_string() && !cwd->get<std::string>().empty() &&
      !is_dir(cwd->get<std::string>())) {
    ret["comment"] = "Desired working directory \"" + cwd->get<std::string>() + "\" is not available";
    co_return ret;
  }
  for (const char* unsupported : {"runas", "umask", "root", "prepend_path"}) {
    if (const json* v = c.arg(unsupported); v != nullptr && !v->is_null()) {
      ret["comment"] = std::string("cmd.run: ") + unsupported + " is not supported by brine yet";
      co_return ret;
    }
  }
  modules::call run;
  run.fun = "cmd.run_all";
  run.kwargs = nlohmann::json::object();
  run.kwargs["cmd"] = name;
  if (cwd != nullptr && !cwd->is_null()) run.kwargs["cwd"] = nlohmann::json::parse(cwd->dump());
  if (const json* env = c.arg("env"); env != nullptr && !env->is_null()) {
    run.kwargs["env"] = nlohmann::json::parse(env->dump());
  }
  if (const json* t = c.arg("timeout"); t != nullptr && !t->is_null()) {
    run.kwargs["timeout"] = nlohmann::json::parse(t->dump());
  }
  if (const json* sh = c.arg("shell"); sh != nullptr && !sh->is_null()) {
    run.kwargs["shell"] = nlohmann::json::parse(sh->dump());
  }
  run.jid = c.jid;
  run.timeout = c.timeout;
  run.context = c.context;
  if (c.functions == nullptr) throw base::error("cmd.run: no execution functions to run it with");
  modules::outcome o = co_await modules::execute(*c.functions, std::move(run));
  if (!o.ret.is_object()) {
    std::string text = o.ret.is_string() ? o.ret.get<std::string>() : o.ret.dump();
    if (text.starts_with("ERROR: ")) text.erase(0, 7);
    ret["comment"] = text;
    co_return ret;
  }
  json all = json::object();
  for (const char* key : {"pid", "retcode", "stdout", "stderr"}) {
    if (o.ret.contains(key)) all[key] = json::parse(o.ret[key].dump());
  }
  int retcode = all.value("retcode", 1);
  // success_retcodes: these codes count as 0, and changes say 0 (Salt's
  // cmd.run_all rewrites the retcode).
  if (const json* ok = c.arg("success_retcodes"); ok != nullptr && retcode != 0) {
    json codes = ok->is_array() ? *ok : json::array({*ok});
    for (const auto& code : codes) {
      if (code.is_number_integer() && code.get<int>() == retcode) {
        retcode = 0;
        all["retcode"] = 0;
      }
    }
  }
  ret["changes"] = all;
  ret["result"] = retcode == 0;
  ret["comment"] = "Command \"" + name + "\" run";
  if (stateful) ret = reinterpreted(ret);
  co_return ret;
}

asio::awaitable<json> wait(state_call c) { co_return make_ret(c.name(), true, ""); }

asio::awaitable<json> mod_watch(state_call c) {
  std::string sfun = c.low.value("sfun", "");
  if (sfun == "wait" || sfun == "run" || sfun == "watch") co_return co_await run(std::move(c));
  json ret = make_ret(c.name(), false, "");
  ret["comment"] = "cmd." + sfun +
                   " does not work with the watch requisite, please use cmd.wait or "
                   "cmd.wait_script";
  co_return ret;
}

}  // namespace

void register_cmd_states(registry& reg) {
  reg.add("cmd.run", run, {"name"},
          "cmd.run name=COMMAND [cwd=] [env=] [timeout=] [stateful=False]: runs the command; "
          "its pid, retcode, stdout and stderr are the changes");
  reg.add("cmd.wait", wait, {"name"},
          "cmd.wait name=COMMAND: runs the command only when a watch requisite fires");
  reg.add("cmd.mod_watch", mod_watch, {"name"},
          "cmd.mod_watch: what a watch requisite on cmd.run or cmd.wait runs");
}

}  // namespace brine::states
