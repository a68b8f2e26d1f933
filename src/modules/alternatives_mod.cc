// The alternatives module: Salt's alternatives.* over the Debian/Red Hat
// alternatives system. show_current and check_installed read the link in
// /etc/alternatives; the others run update-alternatives (`alternatives` where
// the os_family grain is RedHat), as Salt does. Like Salt, every function
// needs /etc/alternatives to be a directory (Salt does not load the module
// without it).

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "base/error.h"
#include "modules/alternatives.h"
#include "modules/arguments.h"
#include "modules/context.h"
#include "modules/process.h"
#include "modules/registry.h"

namespace brine::modules {
namespace alternatives_mod {
namespace {

using json = nlohmann::json;

// Python's str.rstrip(): Salt's cmd.run_all strips the end of both streams.
std::string rstrip(std::string s) {
  auto end = s.find_last_not_of(" \t\r\n\v\f");
  s.erase(end == std::string::npos ? 0 : end + 1);
  return s;
}

void require_alternatives_dir(const alternatives_paths& paths, const std::string& fun) {
  struct stat st {};
  if (::stat(paths.links.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    throw tool_failure(fun + ": " + paths.links +
                       " is not a directory on this host; the alternatives module needs it "
                       "(Debian's or Red Hat's alternatives system)");
  }
}

std::string os_family(const call& c) {
  if (c.context == nullptr) return "";
  auto grains = c.context->grains();
  if (!grains) return "";
  auto it = grains->find("os_family");
  return it != grains->end() && it->is_string() ? it->get<std::string>() : "";
}

// Salt's _get_cmd.
std::string tool_of(const alternatives_paths& paths, const call& c) {
  std::string name = os_family(c) == "RedHat" ? "alternatives" : "update-alternatives";
  return paths.tool_dir.empty() ? name : paths.tool_dir + "/" + name;
}

// An argument handed to the tool: text, and not something it would read as
// one of its options.
std::string tool_argument(const arguments& a, const std::string& param) {
  std::string v = a.text_of(param, a.need(param));
  if (v.starts_with("-")) {
    a.fail(param + " must not start with '-' (update-alternatives would read it as an option), "
                   "got '" + v + "'");
  }
  return v;
}

struct tool_run {
  std::string command;  // as the log shows it
  process_result result;
};

// Salt's cmd.run_all(cmd, python_shell=False): output parsed in the C locale,
// both streams right-stripped. Unless `ignore_retcode`, a failure is logged
// as Salt logs it.
asio::awaitable<tool_run> run_tool(alternatives_paths paths, call c, std::vector<std::string> args,
                                   bool ignore_retcode) {
  process_options opts;
  opts.argv.push_back(tool_of(paths, c));
  opts.argv.insert(opts.argv.end(), args.begin(), args.end());
  opts.env = {{"LC_ALL", "C"}, {"LANGUAGE", "C"}};
  opts.timeout = child_limit(c.timeout);
  tool_run run;
  for (const auto& w : opts.argv) run.command += (run.command.empty() ? "" : " ") + w;
  run.result = co_await run_process(std::move(opts));
  if (run.result.timed_out) throw tool_failure(tool_error(run.command, run.result));
  run.result.stdout_text = rstrip(std::move(run.result.stdout_text));
  run.result.stderr_text = rstrip(std::move(run.result.stderr_text));
  if (!ignore_retcode && run.result.retcode != 0) {
    spdlog::error("Command '{}' failed with return code: {}", run.command, run.result.retcode);
    if (!run.result.stderr_text.empty()) spdlog::error("stderr: {}", run.result.stderr_text);
    if (!run.result.stdout_text.empty()) spdlog::error("stdout: {}", run.result.stdout_text);
  }
  co_return run;
}

// The return of a command Salt runs without ignore_retcode: the job's
// retcode is the tool's (Salt's __context__['retcode']), so a failure fails
// the job while still returning the tool's words.
outcome changed(const tool_run& run, std::string text) {
  int rc = run.result.retcode;
  return outcome{json(std::move(text)), rc == 0, rc};
}

// os.readlink: the target, or nullopt with errno set (not a link included).
std::optional<std::string> read_link(const std::string& path) {
  std::vector<char> buf(256);
  for (;;) {
    ssize_t n = ::readlink(path.c_str(), buf.data(), buf.size());
    if (n < 0) return std::nullopt;
    if (static_cast<std::size_t>(n) < buf.size()) return std::string(buf.data(), n);
    buf.resize(buf.size() * 2);
  }
}

std::string link_path(const alternatives_paths& paths, const std::string& name) {
  return paths.links + "/" + name;
}

asio::awaitable<outcome> show_current(alternatives_paths paths, call c) {
  arguments a("alternatives.show_current", c, {"name"});
  std::string name = a.text_of("name", a.need("name"));
  require_alternatives_dir(paths, a.fun());
  if (auto target = read_link(link_path(paths, name))) co_return outcome{json(*target)};
  spdlog::error("alternative: {} does not exist", name);
  co_return outcome{json(false)};
}

asio::awaitable<outcome> check_installed(alternatives_paths paths, call c) {
  arguments a("alternatives.check_installed", c, {"name", "path"});
  std::string name = a.text_of("name", a.need("name"));
  std::string path = a.text_of("path", a.need("path"));
  require_alternatives_dir(paths, a.fun());
  auto target = read_link(link_path(paths, name));
  co_return outcome{json(target.has_value() && *target == path)};
}

// Python's str.splitlines(True)[1] with its trailing '\n' removed (the
// separators are kept, so a "\r\n" line keeps its '\r', as in Salt).
std::optional<std::string> second_line(const std::string& text) {
  auto is_break = [](char ch) {
    return ch == '\n' || ch == '\r' || ch == '\v' || ch == '\f' || ch == '\x1c' || ch == '\x1d' ||
           ch == '\x1e';
  };
  std::size_t i = 0;
  std::vector<std::string> lines;
  while (i < text.size() && lines.size() < 2) {
    std::size_t start = i;
    while (i < text.size() && !is_break(text[i])) ++i;
    if (i < text.size()) {
      if (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      ++i;
    }
    lines.push_back(text.substr(start, i - start));
  }
  if (lines.size() < 2) return std::nullopt;
  std::string line = lines[1];
  while (!line.empty() && line.back() == '\n') line.pop_back();
  return line;
}

// Salt's _read_alternative_link_directly: the second line of the admin file.
json link_from_admin_file(const std::string& dir, const std::string& name) {
  std::string path = dir + "/" + name;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    spdlog::error("alternatives: {} does not exist", name);
    return false;
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    spdlog::error("alternatives: {} does not exist", name);
    return false;
  }
  if (auto line = second_line(text.str())) return *line;
  spdlog::error("alternatives: unable to get master link for {}. Exception: list index out of range",
                name);
  return false;
}

// Salt's _read_alternative_link_with_command: the Link: line of the first
// stanza of update-alternatives --query.
asio::awaitable<outcome> show_link(alternatives_paths paths, call c) {
  arguments a("alternatives.show_link", c, {"name"});
  std::string family = os_family(c);
  require_alternatives_dir(paths, a.fun());
  if (family == "RedHat" || family == "Suse") {
    std::string name = a.text_of("name", a.need("name"));
    co_return outcome{link_from_admin_file(family == "RedHat" ? paths.redhat_admin
                                                              : paths.suse_admin,
                                           name)};
  }
  std::string name = tool_argument(a, "name");
  std::vector<std::string> args = {"--query", name};
  tool_run run = co_await run_tool(paths, c, std::move(args), true);
  const auto& r = run.result;
  if (r.retcode > 0 && !r.stderr_text.empty()) co_return outcome{json(false)};
  std::string first_block = r.stdout_text.substr(0, r.stdout_text.find("\n\n"));
  std::istringstream lines(first_block);
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("Link:")) co_return outcome{json(trim(line.substr(5)))};
  }
  co_return outcome{json(false)};
}

asio::awaitable<outcome> display(alternatives_paths paths, call c) {
  arguments a("alternatives.display", c, {"name"});
  std::string name = tool_argument(a, "name");
  require_alternatives_dir(paths, a.fun());
  std::vector<std::string> args = {"--display", name};
  tool_run run = co_await run_tool(paths, c, std::move(args), true);
  const auto& r = run.result;
  co_return outcome{json(r.retcode > 0 && !r.stderr_text.empty() ? r.stderr_text : r.stdout_text)};
}

asio::awaitable<outcome> check_exists(alternatives_paths paths, call c) {
  arguments a("alternatives.check_exists", c, {"name", "path"});
  std::string name = tool_argument(a, "name");
  std::string path = a.text_of("path", a.need("path"));
  require_alternatives_dir(paths, a.fun());
  std::vector<std::string> args = {"--display", name};
  tool_run run = co_await run_tool(paths, c, std::move(args), true);
  const auto& r = run.result;
  if (r.retcode > 0 && !r.stderr_text.empty()) co_return outcome{json(false)};
  std::istringstream lines(r.stdout_text);
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with(path)) co_return outcome{json(true)};
  }
  co_return outcome{json(false)};
}

asio::awaitable<outcome> install(alternatives_paths paths, call c) {
  arguments a("alternatives.install", c, {"name", "link", "path", "priority"});
  std::string name = tool_argument(a, "name");
  std::string link = tool_argument(a, "link");
  std::string path = tool_argument(a, "path");
  const json& prio = a.need("priority");
  if (!prio.is_primitive() || prio.is_null()) a.fail("priority must be a number, got " + prio.dump());
  std::string priority = a.scalar_text("priority", "");
  require_alternatives_dir(paths, a.fun());
  std::vector<std::string> args = {"--install", link, name, path, priority};
  tool_run run = co_await run_tool(paths, c, std::move(args), false);
  const auto& r = run.result;
  co_return changed(run, r.retcode > 0 && !r.stderr_text.empty() ? r.stderr_text : r.stdout_text);
}

// remove, auto and set: stderr when the tool failed, stdout otherwise.
asio::awaitable<outcome> simple_change(alternatives_paths paths, call c, std::string fun,
                                       std::string option, bool with_path) {
  arguments a(fun, c, with_path ? std::vector<std::string>{"name", "path"}
                                : std::vector<std::string>{"name"});
  std::vector<std::string> args = {option, tool_argument(a, "name")};
  if (with_path) args.push_back(tool_argument(a, "path"));
  require_alternatives_dir(paths, a.fun());
  tool_run run = co_await run_tool(paths, c, std::move(args), false);
  const auto& r = run.result;
  co_return changed(run, r.retcode > 0 ? r.stderr_text : r.stdout_text);
}

asio::awaitable<outcome> remove(alternatives_paths paths, call c) {
  return simple_change(std::move(paths), std::move(c), "alternatives.remove", "--remove", true);
}
asio::awaitable<outcome> set(alternatives_paths paths, call c) {
  return simple_change(std::move(paths), std::move(c), "alternatives.set", "--set", true);
}
asio::awaitable<outcome> auto_(alternatives_paths paths, call c) {
  return simple_change(std::move(paths), std::move(c), "alternatives.auto", "--auto", false);
}

// The registry's function for one of the above with `paths` bound; the lambda
// is not itself a coroutine, it returns the coroutine's awaitable.
function bound(asio::awaitable<outcome> (*fn)(alternatives_paths, call),
               const alternatives_paths& paths) {
  return [fn, paths](call c) { return fn(paths, std::move(c)); };
}

}  // namespace
}  // namespace alternatives_mod

void register_alternatives_module(registry& reg) {
  using namespace alternatives_mod;
  register_alternatives_module(reg, alternatives_paths{});
}

void register_alternatives_module(registry& reg, const alternatives_paths& paths) {
  using namespace alternatives_mod;
  constexpr auto instant = registry::kind::instant;
  reg.add("alternatives.show_current", bound(show_current, paths),
          "alternatives.show_current NAME: the target of the link /etc/alternatives/NAME (the "
          "alternative in use), or False (logged as an error) when there is none.\n\nCLI "
          "example: brine cmd '*' alternatives.show_current editor",
          instant);
  reg.add("alternatives.check_installed", bound(check_installed, paths),
          "alternatives.check_installed NAME PATH: whether /etc/alternatives/NAME points at "
          "PATH.\n\nCLI example: brine cmd '*' alternatives.check_installed editor "
          "/usr/bin/vim.basic",
          instant);
  reg.add("alternatives.show_link", bound(show_link, paths),
          "alternatives.show_link NAME: the master link of the alternative NAME "
          "(update-alternatives --query; the admin file in /var/lib/alternatives on Red Hat, "
          "/var/lib/rpm/alternatives on SUSE), or False.\n\nCLI example: brine cmd '*' "
          "alternatives.show_link editor");
  reg.add("alternatives.display", bound(display, paths),
          "alternatives.display NAME: update-alternatives --display NAME, its output (its error "
          "output when it fails).\n\nCLI example: brine cmd '*' alternatives.display editor");
  reg.add("alternatives.check_exists", bound(check_exists, paths),
          "alternatives.check_exists NAME PATH: whether PATH is one of the alternatives of NAME "
          "(a line of update-alternatives --display starts with it).\n\nCLI example: brine cmd "
          "'*' alternatives.check_exists editor /usr/bin/vim.basic");
  reg.add("alternatives.install", bound(install, paths),
          "alternatives.install NAME LINK PATH PRIORITY: update-alternatives --install LINK NAME "
          "PATH PRIORITY; its output (its error output when it fails, failing the job).\n\nCLI "
          "example: brine cmd '*' alternatives.install editor /usr/bin/editor /usr/bin/emacs 50");
  reg.add("alternatives.remove", bound(remove, paths),
          "alternatives.remove NAME PATH: update-alternatives --remove NAME PATH; its output (its "
          "error output when it fails, failing the job).\n\nCLI example: brine cmd '*' "
          "alternatives.remove editor /usr/bin/emacs");
  reg.add("alternatives.auto", bound(auto_, paths),
          "alternatives.auto NAME: update-alternatives --auto NAME (the highest priority wins "
          "again); its output (its error output when it fails, failing the job).\n\nCLI example: "
          "brine cmd '*' alternatives.auto editor");
  reg.add("alternatives.set", bound(set, paths),
          "alternatives.set NAME PATH: update-alternatives --set NAME PATH (chosen by hand); its "
          "output (its error output when it fails, failing the job).\n\nCLI example: brine cmd "
          "'*' alternatives.set editor /usr/bin/vim.basic");
}

}  // namespace brine::modules
