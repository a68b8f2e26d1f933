// The cmd module: Salt's cmd.run, cmd.run_all and cmd.retcode. Commands run
// through /bin/sh -c in their own process group, killed whole at the timeout.

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include <algorithm>
#include <cstdlib>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/python.h"
#include "fileserver/path.h"
#include "modules/args.h"
#include "modules/arguments.h"
#include "modules/context.h"
#include "modules/process.h"
#include "modules/registry.h"

namespace brine::modules {
namespace cmd_mod {
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


// Salt's umask: octal text ("077", 22 as YAML's number); zero is refused.
mode_t parse_umask(const nlohmann::json& v) {
  std::string text = scalar_text(v);
  std::string digits = text.substr(std::min(text.find_first_not_of('0'), text.size()));
  if (digits.empty()) throw base::error("Zero umask is not allowed.");
  if (digits.find_first_not_of("01234567") != std::string::npos || digits.size() > 4) {
    throw base::error("Invalid umask: '" + text + "'");
  }
  return static_cast<mode_t>(std::stoul(digits, nullptr, 8) & 0777);
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
    } else if (key == "runas") {
      // Salt: pwd.getpwnam(runas), else "User 'x' is not available".
      if (!value.is_null()) {
        if (!value.is_string() || value.get_ref<const std::string&>().empty()) {
          throw base::error(fun + ": runas must be a user name, got " + value.dump());
        }
        struct passwd pw {};
        struct passwd* found = nullptr;
        std::vector<char> buf(16384);
        if (::getpwnam_r(value.get<std::string>().c_str(), &pw, buf.data(), buf.size(), &found) !=
                0 ||
            found == nullptr) {
          throw base::error("User '" + value.get<std::string>() + "' is not available");
        }
        spec.options.runas = value.get<std::string>();
      }
    } else if (key == "umask") {
      if (!value.is_null()) spec.options.umask = parse_umask(value);
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
                        "' (accepted: cmd, cwd, env, runas, shell, stdin, stdin_raw_newlines, "
                        "timeout, umask" +
                        (fun == "cmd.run" ? ", redirect_stderr" : "") + ", python_shell)");
    }
  }
  if (spec.command.empty()) throw base::error(fun + " needs a command to run");
  if (stdin_text) {
    spec.options.stdin_text =
        raw_newlines ? std::move(*stdin_text) : base::expand_backslash_n(*stdin_text);
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

// Removes the script's temporary copy however the call ends.
struct temp_file {
  std::string path;
  ~temp_file() {
    if (!path.empty()) ::unlink(path.c_str());
  }
};

// Salt's cmd.script: the script (salt:// through the minion's file client,
// or a path on the minion) is copied to a temporary file in cwd (else
// /tmp), mode 0500, owned by runas, and run with args; the answer is
// cmd.run_all's. A source that cannot be had answers cache_error: True.
asio::awaitable<outcome> script(call c) {
  call inner = c;
  inner.args = nlohmann::json::array();
  std::optional<std::string> source;
  if (!c.args.empty()) source = scalar_text(c.args[0]);
  nlohmann::json args = nullptr;
  if (c.args.size() > 1) {
    std::string joined;
    for (size_t i = 1; i < c.args.size(); ++i) joined += (i > 1 ? " " : "") + scalar_text(c.args[i]);
    args = joined;
  }
  std::string saltenv = "base";
  if (c.context != nullptr) {
    const auto& opts = c.context->opts();
    if (auto it = opts.find("saltenv"); it != opts.end() && it->is_string() && !it->empty()) {
      saltenv = it->get<std::string>();
    }
  }
  for (auto it = inner.kwargs.begin(); it != inner.kwargs.end();) {
    const std::string key = it.key();
    if (key == "source") {
      source = scalar_text(*it);
    } else if (key == "args") {
      args = *it;
    } else if (key == "saltenv") {
      if (!it->is_null()) saltenv = scalar_text(*it);
    } else if (key == "template") {
      if (!it->is_null()) {
        throw base::error("cmd.script: template= is rendered by the cmd.script state; the "
                          "execution function runs the script as it is");
      }
    } else {
      ++it;
      continue;
    }
    it = inner.kwargs.erase(it);
  }
  if (!source || source->empty()) {
    throw base::error("cmd.script needs the script: cmd.script salt://scripts/x.sh [ARGS]");
  }
  nlohmann::json cache_error = {{"pid", 0}, {"retcode", 1}, {"stdout", ""}, {"stderr", ""},
                                {"cache_error", true}};
  std::string local;
  if (auto u = fileserver::parse_url(*source)) {
    auto checked = fileserver::check_path(u->path);
    if (!checked.error.empty()) throw base::error("cmd.script: " + *source + ": " + checked.error);
    if (c.context == nullptr) throw base::error("cmd.script: salt:// needs a minion");
    std::string env = u->saltenv.value_or(saltenv);
    std::vector<std::string> paths{checked.path};
    auto got = co_await c.context->files().cache(env, std::move(paths));
    if (!got[0].error.empty()) co_return outcome{cache_error, false, 1};
    local = got[0].local;
  } else {
    local = source->starts_with("file://") ? source->substr(7) : *source;
    struct stat st {};
    if (::stat(local.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
      co_return outcome{cache_error, false, 1};
    }
  }
  // The temporary copy: beside the work (cwd) as Salt's mkstemp(dir=cwd),
  // with the source's extension.
  std::string dir = "/tmp";
  if (auto cwd = inner.kwargs.find("cwd"); cwd != inner.kwargs.end() && cwd->is_string() &&
                                           !cwd->get<std::string>().empty()) {
    dir = cwd->get<std::string>();
  }
  std::string base_name = source->substr(source->rfind('/') + 1);
  base_name = base_name.substr(0, base_name.find('?'));
  std::string ext;
  if (auto dot = base_name.rfind('.'); dot != std::string::npos && dot != 0) {
    ext = base_name.substr(dot);
  }
  std::string pattern = dir + "/__brine.tmp.XXXXXX" + ext;
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  int fd = ::mkstemps(name.data(), static_cast<int>(ext.size()));
  if (fd < 0) throw base::error("cmd.script: cannot create a file in " + dir + ": " + std::strerror(errno));
  temp_file copy{name.data()};
  {
    std::ifstream in(local, std::ios::binary);
    std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::size_t done = 0;
    while (done < data.size()) {
      ssize_t n = ::write(fd, data.data() + done, data.size() - done);
      if (n <= 0) {
        ::close(fd);
        throw base::error("cmd.script: cannot write " + copy.path + ": " + std::strerror(errno));
      }
      done += static_cast<std::size_t>(n);
    }
    ::close(fd);
  }
  ::chmod(copy.path.c_str(), 0500);
  if (auto r = inner.kwargs.find("runas"); r != inner.kwargs.end() && r->is_string()) {
    struct passwd pw {};
    struct passwd* found = nullptr;
    std::vector<char> buf(16384);
    if (::getpwnam_r(r->get<std::string>().c_str(), &pw, buf.data(), buf.size(), &found) == 0 &&
        found != nullptr) {
      [[maybe_unused]] int ignored = ::chown(copy.path.c_str(), pw.pw_uid, static_cast<gid_t>(-1));
    }
  }
  std::string command = shell_quote(copy.path);
  if (args.is_string() && !args.get<std::string>().empty()) {
    for (const auto& w : shlex_split("cmd.script: args", args.get<std::string>())) {
      command += " " + shell_quote(w);
    }
  } else if (args.is_array()) {
    for (const auto& w : args) command += " " + shell_quote(scalar_text(w));
  } else if (!args.is_null() && !args.is_string()) {
    command += " " + shell_quote(scalar_text(args));
  }
  inner.kwargs["cmd"] = command;
  outcome out = co_await run_all(std::move(inner));
  co_return out;
}

}  // namespace
}  // namespace cmd_mod

void register_cmd_module(registry& reg) {
  using namespace cmd_mod;
  reg.add("cmd.shell", run,
          "cmd.shell CMD [cwd= env= stdin= timeout=]: cmd.run through the shell (brine's "
          "cmd.run always uses /bin/sh).");
  reg.add("cmd.which", which,
          "cmd.which NAME: the path of the executable NAME found in PATH, or None.",
          registry::kind::instant);
  reg.add("cmd.has_exec", has_exec, "cmd.has_exec NAME: whether NAME is an executable in PATH.",
          registry::kind::instant);
  reg.add("cmd.script", script,
          "cmd.script SOURCE [ARGS] [args=] [saltenv=] [cwd= env= runas= shell= stdin= timeout= "
          "umask=]: copies a script (salt:// or a path on the minion) to a temporary file and "
          "runs it; returns pid, retcode, stdout, stderr (cache_error: True when the source "
          "cannot be had).");
  reg.add("cmd.run", run,
          "cmd.run CMD [cwd= env= stdin= timeout=]: runs CMD with /bin/sh, returns its output "
          "(stderr merged in).");
  reg.add("cmd.run_all", run_all,
          "cmd.run_all CMD [cwd= env= stdin= timeout=]: returns pid, retcode, stdout, stderr.");
  reg.add("cmd.retcode", retcode,
          "cmd.retcode CMD [cwd= env= stdin= timeout=]: returns the exit code only.");
}

}  // namespace brine::modules
