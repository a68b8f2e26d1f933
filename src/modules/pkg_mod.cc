// The pkg module: Salt's aptpkg for Debian and its derivatives. What is
// installed comes from dpkg-query, candidates from apt-cache, changes from
// apt-get; functions that change packages return Salt's diff
// {name: {old, new}} computed from the package lists before and after.

#include <fnmatch.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstddef>
#include <ctime>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"
#include "modules/apt.h"
#include "modules/args.h"
#include "modules/arguments.h"
#include "modules/process.h"
#include "modules/registry.h"

namespace brine::modules {
namespace pkg_mod {
namespace {

using json = nlohmann::json;
// What Salt's aptpkg exports so that apt and debconf never ask questions.
const std::map<std::string, std::string>& apt_env() {
  static const std::map<std::string, std::string> env = {
      {"APT_LISTBUGS_FRONTEND", "none"},
      {"APT_LISTCHANGES_FRONTEND", "none"},
      {"DEBIAN_FRONTEND", "noninteractive"},
      {"UCF_FORCE_CONFFOLD", "1"},
      // Output is parsed in English (Salt resets the locale to C too).
      {"LC_ALL", "C"},
      {"LANGUAGE", "C"},
  };
  return env;
}

asio::awaitable<process_result> run_tool(std::chrono::seconds limit,
                                         std::vector<std::string> argv,
                                         std::optional<std::string> stdin_text = std::nullopt) {
  process_options opts;
  opts.argv = std::move(argv);
  opts.env = apt_env();
  opts.stdin_text = std::move(stdin_text);
  // The job's limit also bounds the child; execute() races the same limit.
  opts.timeout = child_limit(limit);
  process_result r = co_await run_process(std::move(opts));
  co_return r;
}

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    auto nl = text.find('\n');
    lines.push_back(text.substr(0, nl));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return lines;
}

bool has_glob(std::string_view s) { return s.find_first_of("*?[") != std::string_view::npos; }

// Debian version ordering, as dpkg's verrevcmp: letters sort before
// non-letters, '~' before everything (even the end), digit runs numerically.
int char_order(char c) {
  if (std::isdigit(static_cast<unsigned char>(c))) return 0;
  if (std::isalpha(static_cast<unsigned char>(c))) return static_cast<unsigned char>(c);
  if (c == '~') return -1;
  if (c != '\0') return static_cast<unsigned char>(c) + 256;
  return 0;
}

int compare_fragment(std::string_view a, std::string_view b) {
  std::size_t i = 0, j = 0;
  auto at = [](std::string_view s, std::size_t k) { return k < s.size() ? s[k] : '\0'; };
  auto digit = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; };
  while (i < a.size() || j < b.size()) {
    while ((at(a, i) != '\0' && !digit(at(a, i))) || (at(b, j) != '\0' && !digit(at(b, j)))) {
      int ac = char_order(at(a, i));
      int bc = char_order(at(b, j));
      if (ac != bc) return ac < bc ? -1 : 1;
      ++i;
      ++j;
    }
    while (at(a, i) == '0') ++i;
    while (at(b, j) == '0') ++j;
    int first_diff = 0;
    while (digit(at(a, i)) && digit(at(b, j))) {
      if (first_diff == 0) first_diff = at(a, i) - at(b, j);
      ++i;
      ++j;
    }
    if (digit(at(a, i))) return 1;
    if (digit(at(b, j))) return -1;
    if (first_diff != 0) return first_diff < 0 ? -1 : 1;
  }
  return 0;
}

struct debian_version {
  unsigned long epoch = 0;
  std::string_view upstream;
  std::string_view revision;
};

debian_version parse_version(std::string_view v) {
  debian_version out;
  auto colon = v.find(':');
  if (colon != std::string_view::npos) {
    for (char ch : v.substr(0, colon)) {
      if (!std::isdigit(static_cast<unsigned char>(ch))) break;
      out.epoch = out.epoch * 10 + static_cast<unsigned long>(ch - '0');
    }
    v.remove_prefix(colon + 1);
  }
  auto dash = v.rfind('-');
  out.upstream = v.substr(0, dash);
  if (dash != std::string_view::npos) out.revision = v.substr(dash + 1);
  return out;
}

// -1, 0 or 1, as `dpkg --compare-versions`.
int compare_versions(std::string_view a, std::string_view b) {
  debian_version va = parse_version(a), vb = parse_version(b);
  if (va.epoch != vb.epoch) return va.epoch < vb.epoch ? -1 : 1;
  if (int r = compare_fragment(va.upstream, vb.upstream); r != 0) return r;
  return compare_fragment(va.revision, vb.revision);
}

// name -> versions (usually one; several for a package installed for two
// architectures without a suffix to tell them apart).
using pkg_list = std::map<std::string, std::vector<std::string>>;

struct pkg_db {
  pkg_list installed;      // status "installed"
  pkg_list removed;        // removed, configuration files left
  pkg_list purge_desired;  // marked for purge but still installed (also in installed)
};

std::mutex native_arch_mutex;
std::optional<std::string> native_arch_cache;

asio::awaitable<std::string> native_arch(std::chrono::seconds limit) {
  {
    std::lock_guard lock(native_arch_mutex);
    if (native_arch_cache) co_return *native_arch_cache;
  }
  // (A braced list inside a co_await expression trips GCC 12's coroutines.)
  std::vector<std::string> argv = {"dpkg", "--print-architecture"};
  process_result r = co_await run_tool(limit, std::move(argv));
  if (r.retcode != 0) throw tool_failure(tool_error("dpkg --print-architecture", r));
  std::string arch = trim(r.stdout_text);
  std::lock_guard lock(native_arch_mutex);
  native_arch_cache = arch;
  co_return arch;
}

asio::awaitable<pkg_db> read_pkg_db(std::chrono::seconds limit) {
  const std::string arch_native = co_await native_arch(limit);
  std::vector<std::string> argv = {"dpkg-query", "--showformat",
                                   "${Status}\t${Package}\t${Version}\t${Architecture}\n", "-W"};
  process_result r = co_await run_tool(limit, std::move(argv));
  if (r.retcode != 0) throw tool_failure(tool_error("dpkg-query", r));
  pkg_db db;
  for (std::string_view line : split_lines(r.stdout_text)) {
    // "install ok installed\tzsh\t5.9-4+b2\tamd64"; "deinstall ok config-files\tmc\t..."
    std::vector<std::string> fields;
    std::size_t start = 0;
    while (true) {
      auto tab = line.find('\t', start);
      fields.emplace_back(line.substr(start, tab - start));
      if (tab == std::string_view::npos) break;
      start = tab + 1;
    }
    if (fields.size() != 4) continue;
    std::vector<std::string> status = split_words(fields[0]);
    if (status.size() != 3 || fields[1].empty() || fields[2].empty()) continue;
    const std::string& want = status[0];
    const std::string& state = status[2];
    std::string name = fields[1];
    // A package of a foreign architecture is named with it, as apt names it.
    if (fields[3] != "all" && !fields[3].empty() && fields[3] != arch_native) {
      name += ":" + fields[3];
    }
    if (state == "installed") {
      db.installed[name].push_back(fields[2]);
      if (want == "purge") db.purge_desired[name].push_back(fields[2]);
    } else if (state == "config-files") {
      db.removed[name].push_back(fields[2]);
    }
  }
  for (pkg_list* list : {&db.installed, &db.removed, &db.purge_desired}) {
    for (auto& [name, versions] : *list) {
      std::sort(versions.begin(), versions.end());
      versions.erase(std::unique(versions.begin(), versions.end()), versions.end());
    }
  }
  co_return db;
}

// Salt's pkg_resource.stringify: several versions joined by commas.
std::string joined(const std::vector<std::string>& versions) {
  std::string out;
  for (const auto& v : versions) out += (out.empty() ? "" : ",") + v;
  return out;
}

json as_json(const pkg_list& list, bool versions_as_list) {
  json out = json::object();
  for (const auto& [name, versions] : list) {
    out[name] = versions_as_list ? json(versions) : json(joined(versions));
  }
  return out;
}

// Salt's salt.utils.data.compare_dicts on two stringified package lists.
json diff(const pkg_list& before, const pkg_list& after) {
  json out = json::object();
  std::set<std::string> names;
  for (const auto& [n, v] : before) names.insert(n);
  for (const auto& [n, v] : after) names.insert(n);
  for (const auto& name : names) {
    auto b = before.find(name);
    auto a = after.find(name);
    std::string old_v = b == before.end() ? "" : joined(b->second);
    std::string new_v = a == after.end() ? "" : joined(a->second);
    if (old_v != new_v) out[name] = {{"old", old_v}, {"new", new_v}};
  }
  return out;
}

// A package name as apt-get and apt-cache take it; a leading '-' would be
// read as an option.
std::string package_name(const arguments& a, const std::string& what, const json& v) {
  std::string name = a.text_of(what, v);
  if (name.empty()) a.fail(what + " must be a package name, got an empty string");
  if (name.front() == '-') a.fail(what + " must be a package name, got '" + name + "'");
  for (char ch : name) {
    if (std::isspace(static_cast<unsigned char>(ch)) ||
        std::iscntrl(static_cast<unsigned char>(ch))) {
      a.fail(what + " must be a package name without spaces, got '" + name + "'");
    }
  }
  return name;
}

std::vector<std::string> package_names(const arguments& a) {
  if (a.rest().empty()) {
    a.fail("needs at least one package name, e.g. " + a.fun() + " bash");
  }
  std::vector<std::string> names;
  for (const json& v : a.rest()) names.push_back(package_name(a, "package name", v));
  return names;
}

asio::awaitable<outcome> list_pkgs(call c) {
  arguments a("pkg.list_pkgs", c, {"versions_as_list", "removed", "purge_desired"});
  const bool as_list = a.flag("versions_as_list", false);
  const bool removed = a.flag("removed", false);
  const bool purge_desired = a.flag("purge_desired", false);
  pkg_db db = co_await read_pkg_db(c.timeout);
  if (removed) co_return outcome{as_json(db.removed, as_list)};
  co_return outcome{as_json(purge_desired ? db.purge_desired : db.installed, as_list)};
}

asio::awaitable<outcome> version(call c) {
  arguments a("pkg.version", c, {"versions_as_list"}, true);
  const bool as_list = a.flag("versions_as_list", false);
  std::vector<std::string> names = package_names(a);
  pkg_db db = co_await read_pkg_db(c.timeout);
  json ret = json::object();
  bool glob = false;
  for (const auto& name : names) {
    if (has_glob(name)) {
      glob = true;
      for (const auto& [pkg, versions] : db.installed) {
        if (::fnmatch(name.c_str(), pkg.c_str(), 0) == 0) {
          ret[pkg] = as_list ? json(versions) : json(joined(versions));
        }
      }
      continue;
    }
    auto it = db.installed.find(name);
    std::vector<std::string> versions =
        it == db.installed.end() ? std::vector<std::string>{} : it->second;
    ret[name] = as_list ? json(versions) : json(joined(versions));
  }
  if (ret.size() == 1 && !glob) co_return outcome{ret.begin().value()};
  co_return outcome{std::move(ret)};
}

const char* const k_apt_lists = "/var/lib/apt/lists";

// Salt's refresh_db: {source: True (fetched), None (unchanged), False
// (ignored or failed)}.
asio::awaitable<json> refresh(std::chrono::seconds limit, double cache_valid_time, bool failhard) {
  if (cache_valid_time > 0) {
    struct stat st {};
    if (::stat(k_apt_lists, &st) == 0 && static_cast<double>(st.st_mtime) + cache_valid_time >
                                             static_cast<double>(std::time(nullptr))) {
      co_return json::object();
    }
  }
  std::vector<std::string> argv = {"apt-get", "-q", "update"};
  process_result r = co_await run_tool(limit, std::move(argv));
  if (r.retcode != 0 || r.timed_out) throw tool_failure(tool_error("apt-get update", r));
  json ret = json::object();
  std::vector<std::string> errors;
  for (std::string_view line : split_lines(r.stdout_text)) {
    std::vector<std::string> cols = split_words(line);
    if (cols.empty()) continue;
    std::string ident;
    for (std::size_t i = 1; i < cols.size(); ++i) ident += (i > 1 ? " " : "") + cols[i];
    const std::string& kind = cols[0];
    if (kind.find("Get") != std::string::npos) {
      // "Get:2 http://deb.debian.org/debian bookworm-updates InRelease [55.4 kB]"
      auto size = ident.find(" [");
      if (size != std::string::npos && ident.ends_with("B]")) ident.erase(size);
      ret[ident] = true;
    } else if (kind.find("Ign") != std::string::npos) {
      ret[ident] = false;
    } else if (kind.find("Hit") != std::string::npos) {
      ret[ident] = nullptr;
    } else if (kind.find("Err") != std::string::npos) {
      ret[ident] = false;
      errors.push_back(ident);
    }
  }
  if (failhard && !errors.empty()) {
    std::string list;
    for (const auto& e : errors) list += (list.empty() ? "" : ", ") + e;
    throw tool_failure("Error getting repos: " + list);
  }
  co_return ret;
}

asio::awaitable<outcome> refresh_db(call c) {
  arguments a("pkg.refresh_db", c, {"cache_valid_time", "failhard"});
  const double valid = a.seconds("cache_valid_time");
  const bool failhard = a.flag("failhard", false);
  // (co_await inside a braced co_return operand frees the result twice with GCC 12.)
  json ret = co_await refresh(c.timeout, valid, failhard);
  co_return outcome{std::move(ret)};
}

asio::awaitable<outcome> latest_version(call c) {
  arguments a("pkg.latest_version", c,
              {"refresh", "show_installed", "fromrepo", "cache_valid_time"}, true);
  std::vector<std::string> names = package_names(a);
  const bool do_refresh = a.flag("refresh", true);
  const bool show_installed = a.flag("show_installed", false);
  const double valid = a.seconds("cache_valid_time");
  std::optional<std::string> fromrepo = a.text("fromrepo");
  if (fromrepo && (fromrepo->empty() || fromrepo->front() == '-')) {
    a.fail("fromrepo must be a release name such as bookworm-backports, got '" + *fromrepo + "'");
  }

  pkg_db db = co_await read_pkg_db(c.timeout);
  if (do_refresh) co_await refresh(c.timeout, valid, false);

  std::vector<std::string> argv = {"apt-cache", "-q", "policy"};
  argv.insert(argv.end(), names.begin(), names.end());
  if (fromrepo) {
    argv.push_back("-o");
    argv.push_back("APT::Default-Release=" + *fromrepo);
  }
  process_result r = co_await run_tool(c.timeout, std::move(argv));
  if (r.retcode != 0) throw tool_failure(tool_error("apt-cache policy", r));

  // "bash:\n  Installed: 5.2-1\n  Candidate: 5.2-2\n  Version table: ..."
  std::map<std::string, std::string> candidates;
  std::optional<std::string> current;
  for (std::string_view line : split_lines(r.stdout_text)) {
    if (!line.empty() && line.back() == ':' && line.front() != ' ') {
      std::string_view head = line.substr(0, line.size() - 1);
      current.reset();
      for (const auto& name : names) {
        if (head == name || head == std::string_view(name).substr(0, name.find(':'))) {
          current = name;
          break;
        }
      }
    } else if (current && line.find("Candidate") != std::string_view::npos) {
      std::vector<std::string> words = split_words(line);
      std::string candidate = words.size() >= 2 ? words.back() : "";
      if (candidate == "(none)") candidate.clear();
      candidates[*current] = candidate;
    }
  }

  json ret = json::object();
  for (const auto& name : names) {
    std::string candidate = candidates.contains(name) ? candidates[name] : "";
    auto it = db.installed.find(name);
    if (it == db.installed.end() || show_installed) {
      ret[name] = candidate;
      continue;
    }
    // An upgrade only: no installed version is already at least the candidate.
    bool newer = !candidate.empty() &&
                 std::none_of(it->second.begin(), it->second.end(), [&](const std::string& v) {
                   return compare_versions(v, candidate) >= 0;
                 });
    ret[name] = newer ? candidate : "";
  }
  if (names.size() == 1) co_return outcome{ret[names.front()]};
  co_return outcome{std::move(ret)};
}

// Salt's pkg_resource.parse_targets for repository packages: pkgs (names or
// one-key {name: version} mappings) wins over name (a comma-separated list).
std::vector<std::pair<std::string, std::optional<std::string>>> parse_targets(const arguments& a,
                                                                              bool with_versions) {
  std::vector<std::pair<std::string, std::optional<std::string>>> targets;
  if (const json* pkgs = a.get("pkgs")) {
    const std::string expected =
        with_versions ? "pkgs must be a list of package names or {name: version} mappings, got "
                      : "pkgs must be a list of package names, got ";
    if (!pkgs->is_array() || pkgs->empty()) a.fail(expected + pkgs->dump());
    for (const json& item : *pkgs) {
      if (item.is_object() && with_versions) {
        if (item.size() != 1) a.fail(expected + pkgs->dump());
        std::string name = package_name(a, "pkgs entry", item.begin().key());
        const json& v = item.begin().value();
        if (v.is_null()) {
          targets.emplace_back(name, std::nullopt);
        } else {
          targets.emplace_back(name, a.text_of("version of " + name + " in pkgs", v));
        }
      } else if (item.is_string() || item.is_number()) {
        targets.emplace_back(package_name(a, "pkgs entry", item), std::nullopt);
      } else {
        a.fail(expected + pkgs->dump());
      }
    }
  } else if (const json* name = a.get("name")) {
    std::string names = a.text_of("name", *name);
    std::size_t start = 0;
    while (true) {
      auto comma = names.find(',', start);
      targets.emplace_back(package_name(a, "name", names.substr(start, comma - start)),
                           std::nullopt);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  } else {
    a.fail("needs a package: name=PACKAGE or pkgs='[\"a\", \"b\"]'");
  }
  std::set<std::string> seen;
  for (const auto& [name, v] : targets) {
    if (!seen.insert(name).second) a.fail("package " + name + " is given twice");
  }
  return targets;
}

// A version as apt-get takes it after '=': leading '=' stripped (Salt's
// "=1.2" means 1.2). A comparison ('>=1.0', '<2') stays, to be matched
// against what the repositories offer.
std::string requested_version(const arguments& a, const std::string& pkg, std::string v) {
  v.erase(0, v.find_first_not_of('='));
  if (v.empty()) a.fail("the version of " + pkg + " is empty");
  for (char ch : v) {
    if (std::isspace(static_cast<unsigned char>(ch)) ||
        std::iscntrl(static_cast<unsigned char>(ch))) {
      a.fail("the version of " + pkg + " must not contain spaces, got '" + v + "'");
    }
  }
  return v;
}

// Salt's salt.utils.versions.compare with dpkg's ordering; an operator it
// does not know (">>", "<>", ...) compares false, as Salt's does.
bool version_matches(const std::string& have, const std::string& oper, const std::string& want) {
  int r = compare_versions(have, want);
  if (oper.empty() || oper == "==" || oper == "=") return r == 0;
  if (oper == "!=") return r != 0;
  if (oper == ">=") return r >= 0;
  if (oper == "<=") return r <= 0;
  if (oper == ">") return r > 0;
  if (oper == "<") return r < 0;
  return false;
}

// `apt-cache show NAME...`: every version the repositories offer, by name,
// in apt's order (Salt's list_repo_pkgs).
asio::awaitable<std::map<std::string, std::vector<std::string>>> repo_versions(
    std::chrono::seconds limit, std::vector<std::string> names) {
  std::vector<std::string> argv = {"apt-cache", "show"};
  argv.insert(argv.end(), names.begin(), names.end());
  process_result r = co_await run_tool(limit, std::move(argv));
  std::map<std::string, std::vector<std::string>> out;
  std::string current;
  for (std::string_view line : split_lines(r.stdout_text)) {
    if (line.starts_with("Package: ")) {
      current = trim(std::string(line.substr(9)));
    } else if (line.starts_with("Version: ") && !current.empty()) {
      out[current].push_back(trim(std::string(line.substr(9))));
    }
  }
  co_return out;
}

// `dpkg --get-selections PATTERN`: {selection state: [packages]}.
asio::awaitable<std::map<std::string, std::vector<std::string>>> selections(
    std::chrono::seconds limit, std::string pattern) {
  std::vector<std::string> argv = {"dpkg", "--get-selections", pattern.empty() ? "*" : pattern};
  process_result r = co_await run_tool(limit, std::move(argv));
  std::map<std::string, std::vector<std::string>> out;
  for (std::string_view line : split_lines(r.stdout_text)) {
    std::vector<std::string> words = split_words(line);
    if (words.size() == 2) out[words[1]].push_back(words[0]);
  }
  co_return out;
}

// Salt's set_selections for one package: {"old": state or None, "new"},
// or null when it already had that state or dpkg refused.
asio::awaitable<json> set_selection(std::chrono::seconds limit, std::string pkg,
                                    std::string state) {
  std::map<std::string, std::vector<std::string>> all = co_await selections(limit, "");
  json old = nullptr;
  for (const auto& [st, pkgs] : all) {
    if (std::find(pkgs.begin(), pkgs.end(), pkg) != pkgs.end()) old = st;
  }
  if (old == state) co_return json(nullptr);
  std::vector<std::string> argv = {"dpkg", "--set-selections"};
  process_result r = co_await run_tool(limit, std::move(argv), pkg + " " + state + "\n");
  if (r.retcode != 0) co_return json(nullptr);
  co_return json{{"new", state}, {"old", old}};
}

// apt-get fails at once when another apt or dpkg holds the dpkg lock
// (unattended-upgrades, a second job); brine's waits for it a while, within
// the job's limit.
std::vector<std::string> lock_wait(std::chrono::seconds limit) {
  long long wait = std::min<long long>(limit.count() > 0 ? limit.count() : 120, 120);
  return {"-o", "DPkg::Lock::Timeout=" + std::to_string(wait)};
}

std::vector<std::string> dpkg_options(bool force_conf_new) {
  if (force_conf_new) return {"-o", "DPkg::Options::=--force-confnew"};
  return {"-o", "DPkg::Options::=--force-confold", "-o", "DPkg::Options::=--force-confdef"};
}

// Salt's nested outputter, which its CommandExecutionError uses to print
// `info`: mappings with sorted keys, "- " list items, strings line by line.
void nested(const json& v, int indent, const std::string& prefix, std::string& out) {
  const std::string pad(static_cast<std::size_t>(indent), ' ');
  if (v.is_string()) {
    std::string_view text = v.get_ref<const std::string&>();
    bool first = true;
    for (std::string_view line : split_lines(text)) {
      out += pad + (first ? prefix : std::string(prefix.size(), ' ')) + std::string(line) + "\n";
      first = false;
    }
  } else if (v.is_boolean() || v.is_null()) {
    out += pad + prefix + (v.is_null() ? "None" : v.get<bool>() ? "True" : "False") + "\n";
  } else if (v.is_number()) {
    out += pad + prefix + v.dump() + "\n";
  } else if (v.is_array()) {
    for (const json& item : v) {
      if (item.is_structured()) {
        out += pad + "|_\n";
        nested(item, indent + 2, item.is_object() ? "" : "- ", out);
      } else {
        nested(item, indent, "- ", out);
      }
    }
  } else if (v.is_object()) {
    if (indent > 0) out += pad + "----------\n";
    for (const auto& [key, item] : v.items()) {  // (nlohmann::json keeps keys sorted)
      out += pad + prefix + key + ":\n";
      nested(item, indent + 4, "", out);
    }
  }
}

// Salt's CommandExecutionError(what, info={"errors": ..., "changes": ...})
// as text: "WHAT. Additional info follows:\n\nchanges:\n...errors:\n    - ...".
// (pkg states cut the changes part off, as Salt's strerror_without_changes.)
std::string failure_message(const std::string& what, const std::vector<std::string>& errors,
                            const json& changes) {
  std::string body;
  nested(json{{"changes", changes}, {"errors", errors}}, 0, "", body);
  if (!body.empty() && body.back() == '\n') body.pop_back();
  return what + ". Additional info follows:\n\n" + body;
}

// What Salt records of a failed apt-get: its stderr, else brine's summary.
std::string apt_error(const std::string& tool, const process_result& r) {
  std::string err = trim(r.stderr_text);
  return err.empty() || r.timed_out ? tool_error(tool, r) : err;
}

asio::awaitable<outcome> install(call c) {
  arguments a("pkg.install", c,
              {"name", "refresh", "fromrepo", "skip_verify", "debconf", "pkgs", "sources",
               "reinstall", "downloadonly", "ignore_epoch", "version", "install_recommends",
               "only_upgrade", "force_conf_new", "cache_valid_time"});
  for (const char* unsupported : {"debconf", "sources"}) {
    if (a.get(unsupported) != nullptr) {
      a.fail(std::string(unsupported) +
             " is not supported by brine; install packages from a repository with name= or "
             "pkgs=");
    }
  }
  const bool do_refresh = a.flag("refresh", false);
  const bool skip_verify = a.flag("skip_verify", false);
  const bool reinstall = a.flag("reinstall", false);
  const bool downloadonly = a.flag("downloadonly", false);
  a.flag("ignore_epoch", false);  // only meaningful with version comparisons
  const bool only_upgrade = a.flag("only_upgrade", false);
  const bool force_conf_new = a.flag("force_conf_new", false);
  const double valid = a.seconds("cache_valid_time");
  std::optional<bool> recommends;
  if (a.get("install_recommends") != nullptr) recommends = a.flag("install_recommends", true);
  std::optional<std::string> fromrepo = a.text("fromrepo");
  if (fromrepo && (fromrepo->empty() || fromrepo->front() == '-')) {
    a.fail("fromrepo must be a release name such as bookworm-backports, got '" + *fromrepo + "'");
  }

  auto targets = parse_targets(a, true);
  if (std::optional<std::string> v = a.text("version")) {
    if (a.get("pkgs") != nullptr || targets.size() != 1) {
      a.fail("version= applies to a single name=; give versions in pkgs='[{\"name\": \"1.2\"}]'");
    }
    targets.front().second = *v;
  }

  std::vector<std::string> prefix = {"apt-get", "-q", "-y"};
  for (auto& o : lock_wait(c.timeout)) prefix.push_back(std::move(o));
  for (auto& o : dpkg_options(force_conf_new)) prefix.push_back(std::move(o));
  if (recommends)
    prefix.push_back(*recommends ? "--install-recommends" : "--no-install-recommends");
  if (only_upgrade) prefix.push_back("--only-upgrade");
  if (skip_verify) prefix.push_back("--allow-unauthenticated");
  if (downloadonly) prefix.push_back("--download-only");
  if (fromrepo) {
    prefix.push_back("-t");
    prefix.push_back(*fromrepo);
  }

  pkg_db old = co_await read_pkg_db(c.timeout);
  std::vector<std::string> errors;
  std::vector<std::string> compared;
  for (auto& [name, version] : targets) {
    if (version) {
      *version = requested_version(a, name, *version);
      if (version->front() == '<' || version->front() == '>') compared.push_back(name);
    }
  }
  std::map<std::string, std::vector<std::string>> available;
  if (!compared.empty()) available = co_await repo_versions(c.timeout, compared);
  std::vector<std::string> install_targets, downgrades, reinstalls;
  std::vector<std::string> reinstalled_names;
  for (auto& [name, version] : targets) {
    auto it = old.installed.find(name);
    const bool installed = it != old.installed.end();
    if (!version) {
      if (reinstall && installed) {
        reinstalls.push_back(name);
        reinstalled_names.push_back(name);
      } else {
        install_targets.push_back(name);
      }
      continue;
    }
    std::string v = *version;
    if (std::find(compared.begin(), compared.end(), name) != compared.end()) {
      // Salt's match_version: the first offered version that satisfies it.
      const auto comparison = apt::split_comparison(v);
      const std::string& oper = comparison.first;
      const std::string& want = comparison.second;
      const std::vector<std::string>& offered = available[name];
      auto hit = std::find_if(offered.begin(), offered.end(), [&](const std::string& cand) {
        return version_matches(cand, oper.empty() ? "==" : oper, want);
      });
      if (hit == offered.end()) {
        std::string list;
        for (const auto& o : offered) list += (list.empty() ? "" : ", ") + o;
        errors.push_back("No version matching '" + name + v + "' could be found (available: " +
                         (list.empty() ? "None" : list) + ")");
        continue;
      }
      v = *hit;
    }
    std::string target = name + "=" + v;
    std::string current = installed ? joined(it->second) : "";
    if (reinstall && installed && compare_versions(v, current) == 0) {
      reinstalls.push_back(target);
      reinstalled_names.push_back(name);
    } else if (!installed || compare_versions(v, current) >= 0) {
      install_targets.push_back(target);
    } else {
      downgrades.push_back(target);
    }
  }

  std::vector<std::vector<std::string>> commands;
  auto command = [&](std::vector<std::string> extra, const std::vector<std::string>& pkgs) {
    std::vector<std::string> argv = prefix;
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.push_back("install");
    argv.insert(argv.end(), pkgs.begin(), pkgs.end());
    commands.push_back(std::move(argv));
  };
  if (!install_targets.empty()) command({}, install_targets);
  // Salt passes --force-yes, which apt deprecated for this narrower flag.
  if (!downgrades.empty()) command({"--allow-downgrades"}, downgrades);
  if (!reinstalls.empty()) command({"--reinstall"}, reinstalls);
  if (commands.empty()) {
    if (!errors.empty()) {
      throw tool_failure(
          failure_message("Problem encountered installing package(s)", errors, json::object()));
    }
    co_return outcome{json::object()};
  }

  if (do_refresh) co_await refresh(c.timeout, valid, false);
  // Held packages that are targeted are let go for the install and held
  // again afterwards (Salt's aptpkg does the same).
  std::map<std::string, std::vector<std::string>> held = co_await selections(c.timeout, "");
  std::vector<std::string> to_unhold;
  for (const auto& pkg : held["hold"]) {
    for (const auto& [name, version] : targets) {
      if (name == pkg) to_unhold.push_back(pkg);
    }
  }
  for (const auto& pkg : to_unhold) co_await set_selection(c.timeout, pkg, "install");
  for (auto& argv : commands) {
    process_result r = co_await run_tool(c.timeout, std::move(argv));
    if (r.retcode != 0 || r.timed_out) errors.push_back(apt_error("apt-get install", r));
  }
  for (const auto& pkg : to_unhold) co_await set_selection(c.timeout, pkg, "hold");
  pkg_db now = co_await read_pkg_db(c.timeout);
  json ret = diff(old.installed, now.installed);
  for (const auto& name : reinstalled_names) {
    auto o = old.installed.find(name);
    auto n = now.installed.find(name);
    ret[name] = {{"old", o == old.installed.end() ? "" : joined(o->second)},
                 {"new", n == now.installed.end() ? "" : joined(n->second)}};
  }
  if (!errors.empty()) {
    throw tool_failure(failure_message("Problem encountered installing package(s)", errors, ret));
  }
  co_return outcome{std::move(ret)};
}

asio::awaitable<outcome> uninstall(call c, const char* action_name) {
  const std::string action = action_name;
  arguments a("pkg." + action, c, {"name", "pkgs"});
  auto params = parse_targets(a, false);
  pkg_db old = co_await read_pkg_db(c.timeout);
  // Salt's match_wildcard: globs match installed names; a name that is not
  // installed has nothing to remove.
  std::set<std::string> targets;
  auto match = [&](const pkg_list& list) {
    for (const auto& [param, v] : params) {
      if (has_glob(param)) {
        for (const auto& [name, versions] : list) {
          if (::fnmatch(param.c_str(), name.c_str(), 0) == 0) targets.insert(name);
        }
      } else if (list.contains(param)) {
        targets.insert(param);
      }
    }
  };
  match(old.installed);
  if (action == "purge") match(old.removed);
  if (targets.empty()) co_return outcome{json::object()};

  std::vector<std::string> argv = {"apt-get", "-q", "-y"};
  for (auto& o : lock_wait(c.timeout)) argv.push_back(std::move(o));
  argv.push_back(action);
  argv.insert(argv.end(), targets.begin(), targets.end());
  process_result r = co_await run_tool(c.timeout, std::move(argv));
  pkg_db now = co_await read_pkg_db(c.timeout);
  json changes = diff(old.installed, now.installed);
  json ret = action == "purge"
                 ? json{{"removed", diff(old.removed, now.removed)}, {"installed", changes}}
                 : changes;
  if (r.retcode != 0 || r.timed_out) {
    throw tool_failure(failure_message("Problem encountered removing package(s)",
                                       {apt_error("apt-get " + action, r)}, ret));
  }
  co_return outcome{std::move(ret)};
}

asio::awaitable<outcome> remove(call c) { co_return co_await uninstall(std::move(c), "remove"); }

asio::awaitable<outcome> purge(call c) { co_return co_await uninstall(std::move(c), "purge"); }

asio::awaitable<outcome> upgrade(call c) {
  arguments a("pkg.upgrade", c,
              {"refresh", "dist_upgrade", "cache_valid_time", "force_conf_new", "skip_verify",
               "download_only", "downloadonly", "allow_downgrades"});
  const bool do_refresh = a.flag("refresh", true);
  const bool dist = a.flag("dist_upgrade", false);
  const double valid = a.seconds("cache_valid_time");
  const bool force_conf_new = a.flag("force_conf_new", false);
  const bool skip_verify = a.flag("skip_verify", false);
  const bool download_only = a.flag("download_only", false) || a.flag("downloadonly", false);
  const bool allow_downgrades = a.flag("allow_downgrades", false);

  if (do_refresh) co_await refresh(c.timeout, valid, false);
  pkg_db old = co_await read_pkg_db(c.timeout);
  std::vector<std::string> argv = {"apt-get", "-q", "-y"};
  for (auto& o : lock_wait(c.timeout)) argv.push_back(std::move(o));
  for (auto& o : dpkg_options(force_conf_new)) argv.push_back(std::move(o));
  if (skip_verify) argv.push_back("--allow-unauthenticated");
  if (download_only) argv.push_back("--download-only");
  if (allow_downgrades) argv.push_back("--allow-downgrades");
  argv.push_back(dist ? "dist-upgrade" : "upgrade");
  process_result r = co_await run_tool(c.timeout, std::move(argv));
  pkg_db now = co_await read_pkg_db(c.timeout);
  json ret = diff(old.installed, now.installed);
  if (r.retcode != 0 || r.timed_out) {
    throw tool_failure(
        failure_message("Problem encountered upgrading packages",
                        {apt_error(dist ? "apt-get dist-upgrade" : "apt-get upgrade", r)}, ret));
  }
  co_return outcome{std::move(ret)};
}

// Salt's hold/unhold: the targets of name, pkgs ({name: version} entries
// count by name) or sources.
std::vector<std::string> hold_targets(const arguments& a) {
  const json* pkgs = a.get("pkgs");
  const json* sources = a.get("sources");
  const json* name = a.get("name");
  if (pkgs == nullptr && sources == nullptr && name == nullptr) {
    a.fail("One of name, pkgs, or sources must be specified.");
  }
  if (pkgs != nullptr && sources != nullptr) a.fail("Only one of pkgs or sources can be specified.");
  std::vector<std::string> out;
  const json* list = pkgs != nullptr ? pkgs : sources;
  if (list != nullptr) {
    if (!list->is_array()) a.fail("pkgs must be a list of package names, got " + list->dump());
    for (const json& item : *list) {
      if (item.is_object() && item.size() == 1) {
        out.push_back(package_name(a, "pkgs entry", item.begin().key()));
      } else if (item.is_string() && sources == nullptr) {
        out.push_back(package_name(a, "pkgs entry", item));
      } else {
        a.fail("pkgs must be a list of package names or {name: version} mappings, got " +
               list->dump());
      }
    }
  } else {
    out.push_back(package_name(a, "name", *name));
  }
  return out;
}

asio::awaitable<outcome> set_hold(call c, bool hold) {
  arguments a(hold ? "pkg.hold" : "pkg.unhold", c, {"name", "pkgs", "sources", "test"});
  const bool test = a.flag("test", false);
  std::vector<std::string> targets = hold_targets(a);
  json ret = json::object();
  for (const auto& target : targets) {
    json r = {{"name", target}, {"changes", json::object()}, {"result", false}, {"comment", ""}};
    std::map<std::string, std::vector<std::string>> state =
        co_await selections(c.timeout, target);
    const bool is_held = !state["hold"].empty();
    if (hold && !is_held) {
      if (test) {
        r["result"] = nullptr;
        r["comment"] = "Package " + target + " is set to be held.";
      } else {
        json changed = co_await set_selection(c.timeout, target, "hold");
        if (!changed.is_null()) r["changes"] = changed;
        r["result"] = true;
        r["comment"] = "Package " + target + " is now being held.";
      }
    } else if (hold) {
      r["result"] = true;
      r["comment"] = "Package " + target + " is already set to be held.";
    } else if (state.size() == 1 && state.begin()->second.empty()) {
      // (selections() only made the empty "hold" entry: dpkg knows no such package.)
      r["comment"] = "Package " + target + " does not have a state.";
    } else if (is_held) {
      if (test) {
        r["result"] = nullptr;
        r["comment"] = "Package " + target + " is set not to be held.";
      } else {
        json changed = co_await set_selection(c.timeout, target, "install");
        if (!changed.is_null()) r["changes"] = changed;
        r["result"] = true;
        r["comment"] = "Package " + target + " is no longer being held.";
      }
    } else {
      r["result"] = true;
      r["comment"] = "Package " + target + " is already set not to be held.";
    }
    ret[target] = std::move(r);
  }
  co_return outcome{std::move(ret)};
}

asio::awaitable<outcome> hold(call c) { co_return co_await set_hold(std::move(c), true); }
asio::awaitable<outcome> unhold(call c) { co_return co_await set_hold(std::move(c), false); }

asio::awaitable<outcome> get_selections(call c) {
  arguments a("pkg.get_selections", c, {"pattern", "state"});
  std::string pattern = a.text("pattern").value_or("");
  std::optional<std::string> state = a.text("state");
  std::map<std::string, std::vector<std::string>> all = co_await selections(c.timeout, pattern);
  json ret = json::object();
  if (state) {
    ret[*state] = all.contains(*state) ? json(all[*state]) : json::array();
  } else {
    for (const auto& [st, pkgs] : all) {
      if (!pkgs.empty()) ret[st] = pkgs;
    }
  }
  co_return outcome{std::move(ret)};
}

asio::awaitable<outcome> list_upgrades(call c) {
  arguments a("pkg.list_upgrades", c, {"refresh", "dist_upgrade", "cache_valid_time", "fromrepo"});
  const bool do_refresh = a.flag("refresh", true);
  const bool dist = a.flag("dist_upgrade", true);
  const double valid = a.seconds("cache_valid_time");
  std::optional<std::string> fromrepo = a.text("fromrepo");
  if (do_refresh) co_await refresh(c.timeout, valid, false);
  std::vector<std::string> argv = {"apt-get", "--just-print", dist ? "dist-upgrade" : "upgrade"};
  if (fromrepo) {
    argv.push_back("-o");
    argv.push_back("APT::Default-Release=" + *fromrepo);
  }
  process_result r = co_await run_tool(c.timeout, std::move(argv));
  if (r.retcode != 0) {
    std::string msg = "Failed to get upgrades";
    if (!r.stderr_text.empty()) {
      msg += ": " + r.stderr_text;
    } else if (!r.stdout_text.empty()) {
      msg += ": " + r.stdout_text;
    }
    throw tool_failure(msg);
  }
  // "Conf libxfont1 (1:1.4.5-1 Debian:testing [i386])"
  json ret = json::object();
  for (std::string_view line : split_lines(r.stdout_text)) {
    if (!line.starts_with("Conf ")) continue;
    std::vector<std::string> words = split_words(line);
    if (words.size() < 3 || !words[2].starts_with('(')) continue;
    ret[words[1]] = words[2].substr(1);
  }
  co_return outcome{std::move(ret)};
}

asio::awaitable<outcome> upgrade_available(call c) {
  arguments a("pkg.upgrade_available", c, {"name", "refresh"});
  std::string name = package_name(a, "name", a.need("name"));
  call latest;
  latest.fun = "pkg.latest_version";
  latest.args = json::array({name});
  latest.kwargs = {{"refresh", a.flag("refresh", true)}};
  latest.timeout = c.timeout;
  latest.jid = c.jid;
  outcome o = co_await latest_version(std::move(latest));
  co_return outcome{o.ret != ""};
}

asio::awaitable<outcome> version_cmp(call c) {
  arguments a("pkg.version_cmp", c, {"pkg1", "pkg2", "ignore_epoch"});
  std::string v1 = a.text_of("pkg1", a.need("pkg1"));
  std::string v2 = a.text_of("pkg2", a.need("pkg2"));
  if (a.flag("ignore_epoch", false)) {
    v1.erase(0, v1.find(':') == std::string::npos ? 0 : v1.find(':') + 1);
    v2.erase(0, v2.find(':') == std::string::npos ? 0 : v2.find(':') + 1);
  }
  co_return outcome{compare_versions(v1, v2)};
}

asio::awaitable<outcome> list_repo_pkgs(call c) {
  arguments a("pkg.list_repo_pkgs", c, {}, true);
  std::vector<std::string> names = package_names(a);
  std::map<std::string, std::vector<std::string>> found =
      co_await repo_versions(c.timeout, std::move(names));
  json ret = json::object();
  for (const auto& [name, versions] : found) ret[name] = versions;
  co_return outcome{std::move(ret)};
}

}  // namespace
}  // namespace pkg_mod

namespace apt {

asio::awaitable<process_result> run_tool(std::chrono::seconds limit,
                                         std::vector<std::string> argv,
                                         std::string stdin_text) {
  std::optional<std::string> in;
  if (!stdin_text.empty()) in = std::move(stdin_text);
  process_result r = co_await pkg_mod::run_tool(limit, std::move(argv), std::move(in));
  co_return r;
}

asio::awaitable<nlohmann::json> refresh(std::chrono::seconds limit, double cache_valid_time,
                                        bool failhard) {
  nlohmann::json r = co_await pkg_mod::refresh(limit, cache_valid_time, failhard);
  co_return r;
}

int compare_versions(std::string_view a, std::string_view b) {
  return pkg_mod::compare_versions(a, b);
}

std::pair<std::string, std::string> split_comparison(const std::string& spec) {
  static const char* const opers[] = {"<=>", "!=", ">=", "<=", ">>", "<<", "<>", ">", "<", "="};
  std::string oper;
  for (const char* o : opers) {
    if (spec.starts_with(o)) {
      oper = o;
      break;
    }
  }
  std::string rest = spec.substr(oper.size());
  if (!rest.empty() && std::isspace(static_cast<unsigned char>(rest.front()))) rest.erase(0, 1);
  if (rest.empty() || rest.find_first_of("<>=") != std::string::npos) return {"", spec};
  return {oper, rest};
}

}  // namespace apt

void register_pkg_module(registry& reg) {
  using namespace pkg_mod;
  reg.add("pkg.list_pkgs", failures_as_outcomes<list_pkgs>,
          "pkg.list_pkgs [versions_as_list=False] [removed=False] [purge_desired=False]: returns "
          "the installed packages as {name: version} (from dpkg-query; several versions are "
          "comma-joined, or a list with versions_as_list=True; removed=True lists packages "
          "removed with their configuration files left).\n"
          "CLI Example: brine cmd '*' pkg.list_pkgs");
  reg.add("pkg.version", failures_as_outcomes<version>,
          "pkg.version NAME [NAME...] [versions_as_list=False]: returns the installed version "
          "of one package as a string ('' when not installed), or {name: version} for several "
          "names or a glob.\n"
          "CLI Example: brine cmd '*' pkg.version bash");
  reg.add("pkg.latest_version", failures_as_outcomes<latest_version>,
          "pkg.latest_version NAME [NAME...] [refresh=True] [show_installed=False] [fromrepo=] "
          "[cache_valid_time=0]: returns the candidate version apt would install, or '' when "
          "the installed version is already the latest (a string for one name, a dict for "
          "several).\n"
          "CLI Example: brine cmd '*' pkg.latest_version bash refresh=False");
  reg.add("pkg.install", failures_as_outcomes<install>,
          "pkg.install NAME | pkgs='[\"a\", {\"b\": \"1.2-1\"}]' [version=] [refresh=False] "
          "[fromrepo=] [reinstall=False] [skip_verify=False] [install_recommends=] "
          "[only_upgrade=False] [force_conf_new=False] [downloadonly=False]: installs with "
          "apt-get (non-interactive, keeping changed configuration files), returns "
          "{name: {'old': '', 'new': '1.2-1'}} for every package that changed.\n"
          "CLI Example: brine cmd '*' pkg.install nginx");
  reg.add("pkg.remove", failures_as_outcomes<remove>,
          "pkg.remove NAME[,NAME...] | pkgs='[\"a\", \"b\"]': removes with apt-get remove "
          "(configuration files stay), returns {name: {'old': '1.2-1', 'new': ''}}.\n"
          "CLI Example: brine cmd '*' pkg.remove nginx");
  reg.add("pkg.purge", failures_as_outcomes<purge>,
          "pkg.purge NAME[,NAME...] | pkgs='[\"a\", \"b\"]': removes with apt-get purge, "
          "configuration files too; returns Salt's {'installed': {name: {'old', 'new'}}, "
          "'removed': {...}} (removed: packages whose leftover configuration was purged).\n"
          "CLI Example: brine cmd '*' pkg.purge nginx");
  reg.add("pkg.refresh_db", failures_as_outcomes<refresh_db>,
          "pkg.refresh_db [cache_valid_time=0] [failhard=False]: runs apt-get update, returns "
          "{source: True (fetched) | None (already up to date) | False (ignored or failed)}; "
          "failhard=True fails the job when a source failed.\n"
          "CLI Example: brine cmd '*' pkg.refresh_db");
  reg.add("pkg.upgrade", failures_as_outcomes<upgrade>,
          "pkg.upgrade [refresh=True] [dist_upgrade=False] [force_conf_new=False] "
          "[download_only=False] [allow_downgrades=False]: upgrades every package with apt-get "
          "upgrade (or dist-upgrade), returns {name: {'old', 'new'}} for what changed.\n"
          "CLI Example: brine cmd '*' pkg.upgrade dist_upgrade=True");
  reg.add("pkg.hold", failures_as_outcomes<hold>,
          "pkg.hold NAME | pkgs='[\"a\", \"b\"]': sets the packages' dpkg selection to hold so "
          "that apt leaves them at their version; returns {name: {name, changes, result, "
          "comment}} per package (changes {'old': 'install', 'new': 'hold'}).\n"
          "CLI Example: brine cmd '*' pkg.hold nginx");
  reg.add("pkg.unhold", failures_as_outcomes<unhold>,
          "pkg.unhold NAME | pkgs='[\"a\", \"b\"]': sets held packages' dpkg selection back to "
          "install; returns {name: {name, changes, result, comment}} per package.\n"
          "CLI Example: brine cmd '*' pkg.unhold nginx");
  reg.add("pkg.get_selections", failures_as_outcomes<get_selections>,
          "pkg.get_selections [pattern=] [state=]: the dpkg selections as {state: [packages]} "
          "(dpkg --get-selections), only `state` when given.\n"
          "CLI Example: brine cmd '*' pkg.get_selections state=hold");
  reg.add("pkg.list_upgrades", failures_as_outcomes<list_upgrades>,
          "pkg.list_upgrades [refresh=True] [dist_upgrade=True] [cache_valid_time=0]: the "
          "packages apt would upgrade, as {name: new version} (apt-get --just-print).\n"
          "CLI Example: brine cmd '*' pkg.list_upgrades refresh=False");
  reg.add("pkg.upgrade_available", failures_as_outcomes<upgrade_available>,
          "pkg.upgrade_available NAME [refresh=True]: whether apt offers a newer version of the "
          "package than the installed one (True/False).\n"
          "CLI Example: brine cmd '*' pkg.upgrade_available bash");
  reg.add("pkg.version_cmp", failures_as_outcomes<version_cmp>,
          "pkg.version_cmp PKG1 PKG2 [ignore_epoch=False]: -1, 0 or 1 as the Debian version "
          "PKG1 is older than, equal to or newer than PKG2 (dpkg's ordering).\n"
          "CLI Example: brine cmd '*' pkg.version_cmp '0.2.4-0' '0.2.4.1-0'",
          registry::kind::instant);
  reg.add("pkg.list_repo_pkgs", failures_as_outcomes<list_repo_pkgs>,
          "pkg.list_repo_pkgs NAME [NAME...]: every version the repositories offer, as "
          "{name: [versions]} (apt-cache show).\n"
          "CLI Example: brine cmd '*' pkg.list_repo_pkgs nginx");
}

}  // namespace brine::modules
