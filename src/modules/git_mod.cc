// The git module's configuration functions: Salt's git.config_get,
// git.config_get_regexp, git.config_set and git.config_unset, through the
// `git config` tool, and what formulas ask of a checkout (git.current_branch,
// git.revision, git.checkout). A repository's own config (--local, run in cwd) or the
// user's global one (--global); user= runs git as that user, so --global
// is that user's ~/.gitconfig.

#include <algorithm>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "modules/arguments.h"
#include "modules/path.h"
#include "modules/process.h"
#include "modules/registry.h"

namespace brine::modules {
namespace git_mod {
namespace {

using json = nlohmann::json;

const std::vector<std::string> k_common = {"cwd", "user", "password", "ignore_retcode",
                                           "output_encoding", "global"};

std::vector<std::string> params(std::vector<std::string> first) {
  first.insert(first.end(), k_common.begin(), k_common.end());
  return first;
}

// Where git runs: Salt's _expand_path (a relative cwd is under the user's
// home), or nothing for --global without cwd.
struct place {
  std::string cwd;
  std::string user;
  bool global = false;
};

place place_of(const arguments& a) {
  place p;
  p.global = a.flag("global", false);
  if (auto u = a.text("user")) p.user = *u;
  if (auto cwd = a.text("cwd")) {
    std::string home = expand_user(p.user.empty() ? "~" : "~" + p.user);
    p.cwd = cwd->starts_with("/") ? *cwd
            : cwd->starts_with("~") ? expand_user(*cwd)
                                    : home + "/" + *cwd;
  } else if (!p.global) {
    a.fail("'cwd' argument required unless global=True");
  }
  return p;
}

std::string key_of(const arguments& a) {
  std::string key = a.scalar_text("key", "");
  if (key.empty()) a.fail("needs the key: " + a.fun() + " KEY cwd=REPO (or global=True)");
  return key;
}

std::string joined(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& w : argv) out += (out.empty() ? "" : " ") + w;
  return out;
}

// Salt's _git_run: `git ...` through cmd.run_all as `user`; with failhard a
// non-zero exit is "Command 'git ...' failed: STDERR" (its stdout, where
// stderr was merged into it: Salt's redirect_stderr).
asio::awaitable<process_result> git(const call& c, const place& p, std::vector<std::string> argv,
                                    bool failhard, bool merge_stderr = false) {
  process_options opts;
  opts.argv = argv;
  opts.merge_stderr = merge_stderr;
  opts.cwd = p.cwd;
  opts.runas = p.user;
  opts.timeout = child_limit(c.timeout);
  process_result r = co_await run_process(std::move(opts));
  r.stdout_text = trim(r.stdout_text);
  r.stderr_text = trim(r.stderr_text);
  if (failhard && r.retcode != 0) {
    std::string msg = "Command '" + joined(argv) + "' failed";
    const std::string& err = merge_stderr ? r.stdout_text : r.stderr_text;
    if (!err.empty()) msg += ": " + err;
    throw tool_failure(msg);
  }
  co_return r;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::vector<std::string> which_config(const place& p) {
  return {p.global ? "--global" : "--local"};
}

// `git config --get-all KEY`: the values, or null when the key is not set.
asio::awaitable<json> get_all(const call& c, const place& p, std::string key) {
  std::vector<std::string> argv = {"git", "config"};
  for (auto& w : which_config(p)) argv.push_back(w);
  argv.push_back("--get-all");
  argv.push_back(key);
  process_result r = co_await git(c, p, std::move(argv), false);
  if (r.retcode == 1) co_return json(nullptr);
  json out = json::array();
  for (auto& l : lines(r.stdout_text)) out.push_back(l);
  co_return out;
}

asio::awaitable<outcome> config_get(call c) {
  arguments a("git.config_get", c, params({"key", "all"}));
  std::string key = key_of(a);
  place p = place_of(a);
  json values = co_await get_all(c, p, key);
  if (values.is_null() || a.flag("all", false)) co_return outcome{values};
  co_return outcome{values.empty() ? json("") : values.back()};
}

// {key: [values]} of the keys matching the regex `key` (and values matching
// value_regex).
asio::awaitable<json> get_regexp(const call& c, const place& p, std::string key,
                                 std::optional<std::string> value_regex) {
  std::vector<std::string> argv = {"git", "config"};
  for (auto& w : which_config(p)) argv.push_back(w);
  argv.push_back("--get-regexp");
  argv.push_back(key);
  if (value_regex) argv.push_back(*value_regex);
  process_result r = co_await git(c, p, std::move(argv), false);
  nlohmann::ordered_json ret = nlohmann::ordered_json::object();
  if (r.retcode == 1) co_return json(ret);
  for (const auto& line : lines(r.stdout_text)) {
    std::vector<std::string> words = split_words(line);
    if (words.size() < 2) continue;
    // str.split(None, 1): the value is the rest after the first whitespace run.
    std::size_t at = line.find_first_of(" \t");
    std::string value = trim(line.substr(at));
    ret[words[0]].push_back(value);
  }
  co_return json(ret);
}

asio::awaitable<outcome> config_get_regexp(call c) {
  arguments a("git.config_get_regexp", c, params({"key", "value_regex"}));
  std::string key = key_of(a);
  place p = place_of(a);
  std::optional<std::string> value_regex;
  if (a.get("value_regex")) value_regex = a.scalar_text("value_regex", "");
  json ret = co_await get_regexp(c, p, key, value_regex);
  co_return outcome{ret};
}

// Salt's multivar: a list, or text split at commas.
std::vector<std::string> multivar_of(const arguments& a) {
  std::vector<std::string> out;
  const json* m = a.get("multivar");
  if (m == nullptr) return out;
  if (m->is_array()) {
    for (const auto& item : *m) out.push_back(item.is_string() ? item.get<std::string>() : item.dump());
    return out;
  }
  std::string text = a.scalar_text("multivar", "");
  std::size_t start = 0;
  for (;;) {
    std::size_t comma = text.find(',', start);
    out.push_back(text.substr(start, comma == std::string::npos ? comma : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

asio::awaitable<outcome> config_set(call c) {
  arguments a("git.config_set", c, params({"key", "value", "multivar", "add"}));
  std::string key = key_of(a);
  place p = place_of(a);
  if (a.get("value") && a.get("multivar")) a.fail("Only one of 'value' and 'multivar' is permitted");
  if (!a.get("value") && !a.get("multivar")) a.fail("needs value= or multivar=");
  std::vector<std::string> prefix = {"git", "config"};
  if (p.global) prefix.push_back("--global");
  if (a.get("value")) {
    std::vector<std::string> argv = prefix;
    argv.push_back(a.flag("add", false) ? "--add" : "--replace-all");
    argv.push_back(key);
    argv.push_back(a.scalar_text("value", ""));
    co_await git(c, p, std::move(argv), true);
  } else {
    std::vector<std::string> values = multivar_of(a);
    for (std::size_t i = 0; i < values.size(); ++i) {
      std::vector<std::string> argv = prefix;
      argv.push_back(i == 0 ? "--replace-all" : "--add");
      argv.push_back(key);
      argv.push_back(values[i]);
      co_await git(c, p, std::move(argv), true);
    }
  }
  json values = co_await get_all(c, p, key);
  co_return outcome{values};
}

asio::awaitable<outcome> config_unset(call c) {
  arguments a("git.config_unset", c, params({"key", "value_regex", "all"}));
  std::string key = key_of(a);
  place p = place_of(a);
  std::optional<std::string> value_regex;
  if (a.get("value_regex")) value_regex = a.scalar_text("value_regex", "");
  std::vector<std::string> argv = {"git", "config", a.flag("all", false) ? "--unset-all" : "--unset"};
  for (auto& w : which_config(p)) argv.push_back(w);
  argv.push_back(key);
  if (value_regex) argv.push_back(*value_regex);
  process_result r = co_await git(c, p, std::move(argv), false);
  switch (r.retcode) {
    case 0:
      co_return outcome{true};
    case 1:
      throw tool_failure("Section or key is invalid");
    case 5: {
      json values = co_await get_all(c, p, key);
      if (values.is_null()) throw tool_failure("Key '" + key + "' does not exist");
      std::string msg = "Multiple values exist for key '" + key + "'";
      if (value_regex) msg += " and value_regex matches multiple values";
      throw tool_failure(msg);
    }
    case 6:
      throw tool_failure("The value_regex is invalid");
    default: {
      std::string msg = "Failed to unset key '" + key + "', git config returned exit code " +
                        std::to_string(r.retcode);
      if (!r.stderr_text.empty()) msg += "; " + r.stderr_text;
      throw tool_failure(msg);
    }
  }
}

// Where a function on one repository runs (no --global): cwd is required.
place repo_place(const arguments& a) {
  if (a.get("cwd") == nullptr) a.fail("missing argument 'cwd' (the repository)");
  return place_of(a);
}

// Salt's git.current_branch: `git rev-parse --abbrev-ref HEAD` in cwd
// ("HEAD" when detached).
asio::awaitable<outcome> current_branch(call c) {
  arguments a("git.current_branch", c,
              {"cwd", "user", "password", "ignore_retcode", "output_encoding"});
  place p = repo_place(a);
  std::vector<std::string> argv = {"git", "rev-parse", "--abbrev-ref", "HEAD"};
  process_result r = co_await git(c, p, std::move(argv), true);
  co_return outcome{r.stdout_text};
}

// Salt's git.revision: `git rev-parse [--short] REV` in cwd.
asio::awaitable<outcome> revision(call c) {
  arguments a("git.revision", c,
              {"cwd", "rev", "short", "user", "password", "ignore_retcode", "output_encoding"});
  place p = repo_place(a);
  std::vector<std::string> argv = {"git", "rev-parse"};
  if (a.flag("short", false)) argv.push_back("--short");
  argv.push_back(a.scalar_text("rev", "HEAD"));
  process_result r = co_await git(c, p, std::move(argv), true);
  co_return outcome{r.stdout_text};
}

// Salt's _format_opts: a list as it is (items made text), text split as
// shlex does; a trailing "--" dropped.
std::vector<std::string> format_opts(const arguments& a, const char* name) {
  std::vector<std::string> out;
  const json* v = a.get(name);
  if (v == nullptr) return out;
  if (v->is_array()) {
    for (const auto& item : *v) {
      out.push_back(item.is_string() ? item.get<std::string>() : item.dump());
    }
    return out;
  }
  if (v->is_string()) {
    out = shlex_split(a.fun() + ": " + name, v->get<std::string>());
  } else {
    out.push_back(v->dump());
  }
  if (!out.empty() && out.back() == "--") out.pop_back();
  return out;
}

// Salt's git.checkout: `git [git_opts] checkout [--force] [opts] [rev]` in
// cwd; its output (git writes it to stderr) is the answer. rev may be left
// out only when opts make a branch (-b, -B).
asio::awaitable<outcome> checkout(call c) {
  arguments a("git.checkout", c,
              {"cwd", "rev", "force", "opts", "git_opts", "user", "password", "ignore_retcode",
               "output_encoding"});
  place p = repo_place(a);
  std::vector<std::string> argv = {"git"};
  for (auto& w : format_opts(a, "git_opts")) argv.push_back(w);
  argv.push_back("checkout");
  if (a.flag("force", false)) argv.push_back("--force");
  std::vector<std::string> opts = format_opts(a, "opts");
  bool makes_branch = std::find(opts.begin(), opts.end(), "-b") != opts.end() ||
                      std::find(opts.begin(), opts.end(), "-B") != opts.end();
  for (auto& w : opts) argv.push_back(w);
  if (a.get("rev") != nullptr) {
    argv.push_back(a.scalar_text("rev", ""));
  } else if (!makes_branch) {
    a.fail("'rev' argument is required unless -b or -B in opts");
  }
  process_result r = co_await git(c, p, std::move(argv), true, true);
  co_return outcome{r.stdout_text};
}

}  // namespace
}  // namespace git_mod

void register_git_module(registry& reg) {
  using namespace git_mod;
  reg.add("git.checkout", failures_as_outcomes<checkout>,
          "git.checkout CWD [rev=REV] [force=False] [opts=''] [git_opts=''] [user=USER]: checks "
          "out REV in the repository CWD (git checkout; opts -b/-B make a branch and need no "
          "REV) and returns git's message.\n\nCLI example: brine cmd '*' git.checkout /srv/app "
          "rev=v1.2");
  reg.add("git.current_branch", failures_as_outcomes<current_branch>,
          "git.current_branch CWD [user=USER]: the branch checked out in the repository CWD "
          "(git rev-parse --abbrev-ref HEAD; 'HEAD' when detached).\n\nCLI example: brine cmd "
          "'*' git.current_branch /srv/app");
  reg.add("git.revision", failures_as_outcomes<revision>,
          "git.revision CWD [rev=HEAD] [short=False] [user=USER]: the commit REV names in the "
          "repository CWD (git rev-parse).\n\nCLI example: brine cmd '*' git.revision /srv/app "
          "short=True");
  reg.add("git.config_get", failures_as_outcomes<config_get>,
          "git.config_get KEY cwd=REPO|global=True [all=False] [user=]: the value of a git "
          "config key (the last one; all=True: every value), None when it is not set.");
  reg.add("git.config_get_regexp", failures_as_outcomes<config_get_regexp>,
          "git.config_get_regexp KEY_REGEX [value_regex=] cwd=REPO|global=True [user=]: "
          "{key: [values]} of the matching git config keys.");
  reg.add("git.config_get_regex", failures_as_outcomes<config_get_regexp>,
          "git.config_get_regex: git.config_get_regexp's other name.");
  reg.add("git.config_set", failures_as_outcomes<config_set>,
          "git.config_set KEY value=V|multivar=[...] cwd=REPO|global=True [add=False] [user=]: "
          "sets a git config key, returns its values after.");
  reg.add("git.config_unset", failures_as_outcomes<config_unset>,
          "git.config_unset KEY [value_regex=] [all=False] cwd=REPO|global=True [user=]: unsets "
          "a git config key; True, or an error naming why not.");
}

}  // namespace brine::modules
