// The hosts module: Salt's hosts.* over the hosts file (Salt's `hosts.file`
// option: the minion's options, grains or pillar, /etc/hosts by default).
// Edits touch only the lines of the address they change and rewrite the file
// in place (it is often a bind mount, which a rename would not replace);
// Salt rewrites the whole file, merging every line of an address into one.

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "modules/arguments.h"
#include "modules/context.h"
#include "modules/registry.h"

namespace brine::modules {
namespace hosts_mod {
namespace {

using json = nlohmann::json;
using ordered = nlohmann::ordered_json;

// Salt's config.option("hosts.file").
std::string hosts_file(const call& c) { return option_text(c.context, "hosts.file", "/etc/hosts"); }

// One line of the hosts file, as read: an address line has its address,
// aliases and comment parsed out.
struct line {
  std::string text;  // without its newline
  bool address = false;
  std::string ip;
  std::vector<std::string> aliases;
  std::optional<std::string> comment;
};

line parse_line(const std::string& text) {
  line l{text};
  std::string t = trim(text);
  if (t.empty() || t.front() == '#') return l;
  std::string hosts = t;
  if (auto hash = t.find('#'); hash != std::string::npos) {
    std::string comment = t.substr(hash + 1);
    comment.erase(0, comment.find_first_not_of(" \t"));
    if (!comment.empty()) l.comment = comment;
    hosts = trim(t.substr(0, hash));
  }
  std::vector<std::string> words = split_words(hosts);
  if (words.empty()) return l;
  l.address = true;
  l.ip = words[0];
  l.aliases.assign(words.begin() + 1, words.end());
  return l;
}

std::vector<line> read_hosts(const std::string& path) {
  std::vector<line> out;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return out;  // Salt: no file, no hosts
  std::ifstream in(path, std::ios::binary);
  if (!in) throw tool_failure("cannot read " + path + ": " + std::strerror(errno));
  std::string text;
  while (std::getline(in, text)) {
    if (!text.empty() && text.back() == '\r') text.pop_back();
    out.push_back(parse_line(text));
  }
  return out;
}

void write_hosts(const std::string& path, const std::vector<line>& lines) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  for (const auto& l : lines) out << l.text << '\n';
  out.flush();
  if (!out) throw tool_failure("cannot write " + path + ": " + std::strerror(errno));
}

std::string render(const std::string& ip, const std::vector<std::string>& aliases,
                   const std::optional<std::string>& comment) {
  std::string text = ip + "\t\t";
  for (std::size_t i = 0; i < aliases.size(); ++i) text += (i ? " " : "") + aliases[i];
  if (comment) text += "\t\t# " + *comment;
  return text;
}

// Salt's hosts.list_hosts: every address with its aliases (and the comment
// of its line), comment lines as comment-N, in file order.
ordered list(const std::vector<line>& lines) {
  ordered ret = ordered::object();
  int count = 0;
  for (const auto& l : lines) {
    std::string t = trim(l.text);
    if (t.empty()) continue;
    if (!l.address) {
      if (t.front() == '#') ret["comment-" + std::to_string(count++)] = ordered::array({t});
      continue;
    }
    ordered& entry = ret[l.ip];
    if (!entry.contains("aliases")) entry["aliases"] = ordered::array();
    for (const auto& a : l.aliases) entry["aliases"].push_back(a);
    if (l.comment) entry["comment"] = *l.comment;
  }
  return ret;
}

bool has_pair(const std::vector<line>& lines, const std::string& ip, const std::string& alias) {
  for (const auto& l : lines) {
    if (l.address && l.ip == ip &&
        std::find(l.aliases.begin(), l.aliases.end(), alias) != l.aliases.end()) {
      return true;
    }
  }
  return false;
}

std::string need_text(const arguments& a, const std::string& name) {
  std::optional<std::string> v = a.text(name);
  if (!v) a.fail("needs " + name + ": " + a.fun() + " ...");
  return *v;
}

// An address or alias written into the file: no whitespace, no '#'.
std::string word(const arguments& a, const std::string& name) {
  std::string v = need_text(a, name);
  if (v.empty() || v.find_first_of(" \t\r\n#") != std::string::npos) {
    a.fail(name + " must be one word without '#', got '" + v + "'");
  }
  return v;
}

std::string comment_text(const arguments& a, const std::string& name) {
  std::string v = a.scalar_text(name, "");
  if (v.find_first_of("\r\n") != std::string::npos) a.fail(name + " must be one line");
  return v;
}

outcome with_order(ordered value) {
  outcome o;
  o.ret = json(value);
  o.ordered_ret = std::make_shared<const ordered>(std::move(value));
  return o;
}

asio::awaitable<outcome> list_hosts(call c) {
  arguments a("hosts.list_hosts", c, {});
  co_return with_order(list(read_hosts(hosts_file(c))));
}

asio::awaitable<outcome> get_ip(call c) {
  arguments a("hosts.get_ip", c, {"host"});
  std::string host = need_text(a, "host");
  for (const auto& [ip, info] : list(read_hosts(hosts_file(c))).items()) {
    if (!info.is_object()) continue;
    const auto& aliases = info["aliases"];
    if (std::find(aliases.begin(), aliases.end(), host) != aliases.end()) co_return outcome{ip};
  }
  co_return outcome{""};
}

asio::awaitable<outcome> get_alias(call c) {
  arguments a("hosts.get_alias", c, {"ip"});
  std::string ip = need_text(a, "ip");
  ordered hosts = list(read_hosts(hosts_file(c)));
  if (!hosts.contains(ip)) co_return with_order(ordered::array());
  co_return with_order(hosts[ip]["aliases"]);
}

asio::awaitable<outcome> has_pair_fn(call c) {
  arguments a("hosts.has_pair", c, {"ip", "alias"});
  std::string ip = need_text(a, "ip");
  std::vector<line> lines = read_hosts(hosts_file(c));
  const json* alias = a.get("alias");
  if (alias == nullptr) a.fail("needs alias: hosts.has_pair IP ALIAS");
  if (alias->is_array()) {
    for (const auto& item : *alias) {
      if (!item.is_string() || !has_pair(lines, ip, item.get<std::string>())) {
        co_return outcome{false};
      }
    }
    co_return outcome{true};
  }
  co_return outcome{has_pair(lines, ip, a.text_of("alias", *alias))};
}

asio::awaitable<outcome> add_host(call c) {
  arguments a("hosts.add_host", c, {"ip", "alias"});
  std::string ip = word(a, "ip");
  std::string alias = word(a, "alias");
  const std::string path = hosts_file(c);
  std::vector<line> lines = read_hosts(path);
  if (has_pair(lines, ip, alias)) co_return outcome{true};
  auto it = std::find_if(lines.begin(), lines.end(),
                         [&](const line& l) { return l.address && l.ip == ip; });
  if (it != lines.end()) {
    it->aliases.push_back(alias);
    it->text = render(ip, it->aliases, it->comment);
  } else {
    lines.push_back(parse_line(render(ip, {alias}, std::nullopt)));
  }
  write_hosts(path, lines);
  co_return outcome{true};
}

asio::awaitable<outcome> set_comment(call c) {
  arguments a("hosts.set_comment", c, {"ip", "comment"});
  std::string ip = word(a, "ip");
  std::string comment = comment_text(a, "comment");
  const std::string path = hosts_file(c);
  std::vector<line> lines = read_hosts(path);
  auto it = std::find_if(lines.begin(), lines.end(),
                         [&](const line& l) { return l.address && l.ip == ip; });
  if (it == lines.end()) co_return outcome{false};
  std::optional<std::string> have = list(lines)[ip].contains("comment")
                                        ? std::optional<std::string>(list(lines)[ip]["comment"])
                                        : std::nullopt;
  if (have == comment) co_return outcome{true};
  // The address's comment is the last one of its lines: one line keeps it.
  for (auto& l : lines) {
    if (l.address && l.ip == ip && l.comment && &l != &*it) {
      l.comment.reset();
      l.text = render(l.ip, l.aliases, std::nullopt);
    }
  }
  it->comment = comment;
  it->text = render(ip, it->aliases, it->comment);
  write_hosts(path, lines);
  co_return outcome{true};
}

asio::awaitable<outcome> rm_host(call c) {
  arguments a("hosts.rm_host", c, {"ip", "alias"});
  std::string ip = need_text(a, "ip");
  std::string alias = need_text(a, "alias");
  const std::string path = hosts_file(c);
  std::vector<line> lines = read_hosts(path);
  if (!has_pair(lines, ip, alias)) co_return outcome{true};
  std::vector<line> kept;
  for (auto& l : lines) {
    if (l.address && l.ip == ip) {
      l.aliases.erase(std::remove(l.aliases.begin(), l.aliases.end(), alias), l.aliases.end());
      if (l.aliases.empty()) continue;  // no alias left: the line goes
      l.text = render(ip, l.aliases, l.comment);
    }
    kept.push_back(std::move(l));
  }
  write_hosts(path, kept);
  co_return outcome{true};
}

asio::awaitable<outcome> set_host(call c) {
  arguments a("hosts.set_host", c, {"ip", "alias", "comment"});
  std::string ip = word(a, "ip");
  std::string alias = need_text(a, "alias");
  if (alias.find_first_of("\r\n#") != std::string::npos) a.fail("alias must not hold '#'");
  std::string comment = comment_text(a, "comment");
  const std::string path = hosts_file(c);
  std::vector<line> lines = read_hosts(path);
  std::vector<std::string> aliases = split_words(alias);
  std::optional<std::string> note;
  if (!comment.empty()) note = comment;
  std::vector<line> kept;
  bool replaced = false;
  for (auto& l : lines) {
    if (l.address && l.ip == ip) {
      // The first line of the address becomes the new one, the others go;
      // an empty alias removes the address.
      if (!replaced && !aliases.empty()) kept.push_back(parse_line(render(ip, aliases, note)));
      replaced = true;
      continue;
    }
    kept.push_back(std::move(l));
  }
  if (!replaced && !aliases.empty()) kept.push_back(parse_line(render(ip, aliases, note)));
  write_hosts(path, kept);
  co_return outcome{true};
}

}  // namespace
}  // namespace hosts_mod

void register_hosts_module(registry& reg) {
  using namespace hosts_mod;
  reg.add("hosts.list_hosts", failures_as_outcomes<list_hosts>,
          "hosts.list_hosts: returns the hosts file's addresses in file order, each as "
          "{aliases, comment}, and its comment lines as comment-N (the file is Salt's hosts.file "
          "option, /etc/hosts by default).\n"
          "CLI Example: brine cmd '*' hosts.list_hosts");
  reg.add("hosts.get_ip", failures_as_outcomes<get_ip>,
          "hosts.get_ip HOST: returns the address the hosts file gives HOST, or ''.\n"
          "CLI Example: brine cmd '*' hosts.get_ip localhost");
  reg.add("hosts.get_alias", failures_as_outcomes<get_alias>,
          "hosts.get_alias IP: returns the aliases the hosts file gives IP ([] when none).\n"
          "CLI Example: brine cmd '*' hosts.get_alias 127.0.0.1");
  reg.add("hosts.has_pair", failures_as_outcomes<has_pair_fn>,
          "hosts.has_pair IP ALIAS: returns whether the hosts file gives IP the alias (or every "
          "alias of a list).\n"
          "CLI Example: brine cmd '*' hosts.has_pair 127.0.0.1 localhost");
  reg.add("hosts.add_host", failures_as_outcomes<add_host>,
          "hosts.add_host IP ALIAS: adds the alias to the address's line (a new line when the "
          "address has none), returns True.\n"
          "CLI Example: brine cmd '*' hosts.add_host 10.0.0.5 db1.example.com");
  reg.add("hosts.rm_host", failures_as_outcomes<rm_host>,
          "hosts.rm_host IP ALIAS: removes the alias from the address's lines (a line left "
          "without aliases goes), returns True.\n"
          "CLI Example: brine cmd '*' hosts.rm_host 10.0.0.5 db1.example.com");
  reg.add("hosts.set_comment", failures_as_outcomes<set_comment>,
          "hosts.set_comment IP COMMENT: sets the comment of the address's line; False when the "
          "address is not in the file.\n"
          "CLI Example: brine cmd '*' hosts.set_comment 10.0.0.5 'database'");
  reg.add("hosts.set_host", failures_as_outcomes<set_host>,
          "hosts.set_host IP ALIAS [comment]: makes ALIAS (one or more names, space-separated) "
          "the address's only aliases, on one line; an empty ALIAS removes the address. Returns "
          "True.\n"
          "CLI Example: brine cmd '*' hosts.set_host 10.0.0.5 'db1 db1.example.com'");
}

}  // namespace brine::modules
