// The cmd module: Salt's cmd.run, cmd.run_all and cmd.retcode. Commands run
// through /bin/sh -c in their own process group, killed whole at the timeout.

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>

#include "base/error.h"
#include "modules/args.h"
#include "modules/process.h"
#include "modules/registry.h"

namespace brine::modules {
namespace {

// A command without a job limit still gets one: a year is "none" in practice.
constexpr double k_max_timeout_seconds = 365.0 * 24 * 3600;

struct command_spec {
  std::string command;
  process_options options;
  double timeout_seconds = 0;  // the effective limit, for the message
};

std::string scalar_text(const nlohmann::json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}


std::string format_seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

// Values may be strings or scalars (YAML gives `PORT: 80` a number); a null
// becomes empty, as in Salt.
void add_env_value(const std::string& fun, std::map<std::string, std::string>& env,
                   const std::string& name, const nlohmann::json& value) {
  if (value.is_null()) {
    env[name] = "";
  } else if (value.is_primitive()) {
    env[name] = scalar_text(value);
  } else {
    throw base::error(fun + ": env value of " + name + " must be a string or a scalar, got " +
                      value.dump());
  }
}

// Salt accepts env as a mapping or as a list of one-key mappings (the form a
// YAML list of `- NAME: value` items gives).
std::map<std::string, std::string> parse_env(const std::string& fun, const nlohmann::json& v) {
  std::map<std::string, std::string> env;
  const std::string expected =
      fun + ": env must be a mapping of NAME: value (or a list of one-key mappings), got ";
  if (v.is_null()) return env;
  if (v.is_object()) {
    for (const auto& [name, value] : v.items()) add_env_value(fun, env, name, value);
    return env;
  }
  if (!v.is_array()) throw base::error(expected + v.dump());
  for (const auto& item : v) {
    if (!item.is_object() || item.size() != 1) throw base::error(expected + v.dump());
    add_env_value(fun, env, item.begin().key(), item.begin().value());
  }
  return env;
}

bool parse_bool(const std::string& fun, const std::string& name, const nlohmann::json& v) {
  if (!v.is_boolean()) {
    throw base::error(fun + ": " + name + " must be true or false, got " + v.dump());
  }
  return v.get<bool>();
}

// Salt turns the two characters \n in stdin into newlines unless told not to,
// so that `stdin='a\nb'` works from a shell.
std::string expand_newlines(std::string text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size() && text[i + 1] == 'n') {
      out += '\n';
      ++i;
    } else {
      out += text[i];
    }
  }
  return out;
}

command_spec parse_command(const std::string& fun, const call& c, bool merge_stderr_default) {
  if (!c.args.is_array() || !c.kwargs.is_object()) {
    throw base::error(fun + ": malformed call: args must be a list and kwargs a mapping");
  }
  command_spec spec;
  spec.options.merge_stderr = merge_stderr_default;
  // Several positional arguments are one command split by the CLI.
  for (const auto& a : c.args) {
    if (!spec.command.empty()) spec.command += ' ';
    spec.command += scalar_text(a);
  }
  std::optional<double> timeout;
  bool raw_newlines = false;
  std::optional<std::string> stdin_text;
  for (const auto& [key, value] : c.kwargs.items()) {
    if (key == "cmd") {
      // `cmd='sed -e s/=/:/g'`: the way to pass a command containing '='.
      if (!c.args.empty()) throw base::error(fun + ": give the command once, not also as cmd=");
      spec.command = scalar_text(value);
    } else if (key == "cwd") {
      if (!value.is_string() || value.get_ref<const std::string&>().empty()) {
        throw base::error(fun + ": cwd must be a directory path (a string), got " + value.dump());
      }
      spec.options.cwd = value.get<std::string>();
    } else if (key == "env") {
      spec.options.env = parse_env(fun, value);
    } else if (key == "timeout") {
      timeout = as_number(value);
      if (!timeout || !std::isfinite(*timeout) || *timeout <= 0) {
        throw base::error(fun + ": timeout must be a positive number of seconds, got " +
                          value.dump());
      }
    } else if (key == "stdin") {
      if (!value.is_string() && !value.is_null()) {
        throw base::error(fun + ": stdin must be a string, got " + value.dump());
      }
      if (value.is_string()) stdin_text = value.get<std::string>();
    } else if (key == "stdin_raw_newlines") {
      raw_newlines = parse_bool(fun, key, value);
    } else if (key == "redirect_stderr" && fun == "cmd.run") {
      spec.options.merge_stderr = parse_bool(fun, key, value);
    } else if (key == "shell") {
      if (!value.is_null()) {
        if (!value.is_string() || !value.get_ref<const std::string&>().starts_with("/")) {
          throw base::error(fun + ": shell must be the absolute path of a shell, got " +
                            value.dump());
        }
        spec.options.shell = value.get<std::string>();
      }
    } else if (key == "python_shell") {
      // Salt runs without a shell unless this is true; brine always uses one,
      // so the flag that formulas and habits pass along is accepted as is.
      parse_bool(fun, key, value);
    } else if (key.starts_with("__")) {
      // Salt's __pub_* bookkeeping, passed to every function.
    } else {
      // Refused rather than ignored: silently dropping runas= or umask= would
      // run the command with more rights than asked for.
      throw base::error(fun + ": unknown keyword argument '" + key +
                        "' (accepted: cmd, cwd, env, shell, stdin, stdin_raw_newlines, timeout" +
                        (fun == "cmd.run" ? ", redirect_stderr" : "") + ", python_shell)");
    }
  }
  if (spec.command.empty()) throw base::error(fun + " needs a command to run");
  if (stdin_text) {
    spec.options.stdin_text =
        raw_newlines ? std::move(*stdin_text) : expand_newlines(std::move(*stdin_text));
  }

  double limit = k_max_timeout_seconds;
  if (c.timeout > std::chrono::seconds::zero()) limit = static_cast<double>(c.timeout.count());
  if (timeout) limit = std::min(limit, *timeout);
  spec.timeout_seconds = limit;
  spec.options.timeout =
      std::max(std::chrono::milliseconds(1), std::chrono::milliseconds(std::llround(limit * 1000)));
  spec.options.shell_command = spec.command;
  return spec;
}

// Salt strips all trailing whitespace (rstrip=True).
std::string rstrip(std::string s) {
  auto end = s.find_last_not_of(" \t\n\r\f\v");
  s.erase(end == std::string::npos ? 0 : end + 1);
  return s;
}

std::string output_text(std::string text, bool truncated, std::size_t limit) {
  text = rstrip(std::move(text));
  if (truncated) {
    text += "\n[brine: output truncated: the command wrote more than " + std::to_string(limit) +
            " bytes]";
  }
  return text;
}

std::string timeout_message(const command_spec& spec) {
  return "command '" + spec.command + "' timed out after " + format_seconds(spec.timeout_seconds) +
         " s; its process group was killed";
}

asio::awaitable<outcome> run(call c) {
  command_spec spec = parse_command("cmd.run", c, true);
  const std::size_t limit = spec.options.max_output;
  process_result r = co_await run_process(std::move(spec.options));
  if (r.timed_out) co_return error_outcome(timeout_message(spec));
  co_return outcome{output_text(std::move(r.stdout_text), r.stdout_truncated, limit),
                    r.retcode == 0, r.retcode};
}

asio::awaitable<outcome> run_all(call c) {
  command_spec spec = parse_command("cmd.run_all", c, false);
  const std::size_t limit = spec.options.max_output;
  process_result r = co_await run_process(std::move(spec.options));
  nlohmann::json ret = {
      {"pid", r.pid},
      {"retcode", r.retcode},
      {"stdout", output_text(std::move(r.stdout_text), r.stdout_truncated, limit)},
      {"stderr", output_text(std::move(r.stderr_text), r.stderr_truncated, limit)},
  };
  if (r.timed_out) {
    std::string err = ret["stderr"].get<std::string>();
    ret["stderr"] = (err.empty() ? "" : err + "\n") + "ERROR: " + timeout_message(spec);
    ret["retcode"] = 1;
    co_return outcome{std::move(ret), false, 1};
  }
  co_return outcome{std::move(ret), r.retcode == 0, r.retcode};
}

asio::awaitable<outcome> retcode(call c) {
  command_spec spec = parse_command("cmd.retcode", c, true);
  process_result r = co_await run_process(std::move(spec.options));
  if (r.timed_out) co_return error_outcome(timeout_message(spec));
  // The exit code is the answer, not a failure of the job.
  co_return outcome{r.retcode, true, 0};
}

// PATH lookup as Salt's salt.utils.path.which: the first executable file.
std::optional<std::string> which_path(const std::string& name) {
  auto executable = [](const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
  };
  if (name.find('/') != std::string::npos) {
    if (executable(name)) return name;
    return std::nullopt;
  }
  const char* path = ::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  for (;;) {
    size_t end = dirs.find(':', start);
    std::string dir = dirs.substr(start, end == std::string::npos ? end : end - start);
    if (!dir.empty() && executable(dir + "/" + name)) return dir + "/" + name;
    if (end == std::string::npos) return std::nullopt;
    start = end + 1;
  }
}

std::string one_name(const std::string& fun, const call& c) {
  if (c.args.size() == 1 && c.args[0].is_string() && c.kwargs.is_object()) {
    for (const auto& [k, v] : c.kwargs.items()) {
      if (!k.starts_with("__")) throw base::error(fun + ": unknown keyword argument '" + k + "'");
    }
    return c.args[0].get<std::string>();
  }
  throw base::error(fun + " takes one argument: the name of a command");
}

asio::awaitable<outcome> which(call c) {
  auto p = which_path(one_name("cmd.which", c));
  co_return outcome{p ? nlohmann::json(*p) : nlohmann::json(nullptr)};
}

asio::awaitable<outcome> has_exec(call c) {
  co_return outcome{which_path(one_name("cmd.has_exec", c)).has_value()};
}

// Salt's cmd.script: a script copied to the minion and run; brine runs a
// script that is already on the minion (salt:// needs the file server).
asio::awaitable<outcome> script(call c) {
  if (c.args.empty() || !c.args[0].is_string()) {
    throw base::error("cmd.script needs the path of a script: cmd.script /srv/scripts/x.sh");
  }
  std::string source = c.args[0].get<std::string>();
  if (source.starts_with("salt://")) {
    throw base::error("cmd.script: " + source +
                      " needs the master's file server, which brine does not have yet; give "
                      "the path of a script on the minion");
  }
  if (source.empty() || source[0] != '/') {
    throw base::error("cmd.script: the script must be an absolute path, got '" + source + "'");
  }
  struct stat st {};
  if (::stat(source.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    throw base::error("cmd.script: no script file at " + source);
  }
  call inner = c;
  inner.args = nlohmann::json::array();
  std::string command = "/bin/sh '" + source + "'";
  if (::access(source.c_str(), X_OK) == 0) command = "'" + source + "'";
  for (size_t i = 1; i < c.args.size(); ++i) command += " " + scalar_text(c.args[i]);
  if (auto a = inner.kwargs.find("args"); a != inner.kwargs.end()) {
    command += " " + scalar_text(*a);
    inner.kwargs.erase(a);
  }
  inner.args.push_back(command);
  outcome out = co_await run_all(std::move(inner));
  co_return out;
}

}  // namespace

void register_cmd_module(registry& reg) {
  reg.add("cmd.shell", run,
          "cmd.shell CMD [cwd= env= stdin= timeout=]: cmd.run through the shell (brine's "
          "cmd.run always uses /bin/sh).");
  reg.add("cmd.which", which,
          "cmd.which NAME: the path of the executable NAME found in PATH, or None.",
          registry::kind::instant);
  reg.add("cmd.has_exec", has_exec, "cmd.has_exec NAME: whether NAME is an executable in PATH.",
          registry::kind::instant);
  reg.add("cmd.script", script,
          "cmd.script PATH [ARGS] [args=] [cwd= env= timeout=]: runs a script on the minion, "
          "returns pid, retcode, stdout, stderr (salt:// sources need the file server, not "
          "there yet).");
  reg.add("cmd.run", run,
          "cmd.run CMD [cwd= env= stdin= timeout=]: runs CMD with /bin/sh, returns its output "
          "(stderr merged in).");
  reg.add("cmd.run_all", run_all,
          "cmd.run_all CMD [cwd= env= stdin= timeout=]: returns pid, retcode, stdout, stderr.");
  reg.add("cmd.retcode", retcode,
          "cmd.retcode CMD [cwd= env= stdin= timeout=]: returns the exit code only.");
}

}  // namespace brine::modules
