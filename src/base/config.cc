#include "base/config.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/fs.h"
#include "base/log.h"
#include "base/schedule_option.h"
#include "base/yaml_json.h"

namespace brine::base {
namespace {

constexpr uint64_t k_u32_max = std::numeric_limits<uint32_t>::max();
constexpr uint64_t k_min_frame_bytes = 1024;
constexpr uint64_t k_max_frame_bytes = 1024ull * 1024 * 1024;
constexpr uint64_t k_min_spool_bytes = 64 * 1024;
constexpr uint64_t k_max_spool_bytes = 1024ull * 1024 * 1024 * 1024;
constexpr size_t k_max_id_length = 255;
constexpr size_t k_finger_length = 32 * 3 - 1;  // 32 hex bytes joined by ':'
constexpr size_t k_max_shown = 100;             // a whole fingerprint fits

bool is_control(unsigned char c) { return c < 0x20 || c == 0x7f; }

// A value as the user wrote it, on one line: quoted and escaped when it would
// otherwise be invisible or span lines.
std::string show(std::string_view text) {
  std::string_view cut = text.substr(0, k_max_shown);
  bool quote = text.empty() || std::any_of(text.begin(), text.end(), [](unsigned char c) {
                 return c == ' ' || c == '"' || c == '\\' || is_control(c);
               });
  std::string out = quote ? "\"" : "";
  for (unsigned char c : cut) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '"' || c == '\\') {
      out += {'\\', static_cast<char>(c)};
    } else if (is_control(c)) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  if (cut.size() < text.size()) out += "...";
  if (quote) out += '"';
  return out;
}

std::string describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Scalar:
      return show(node.Scalar());
    case YAML::NodeType::Sequence:
      return fmt::format("a list of {}", node.size());
    case YAML::NodeType::Map:
      return "a mapping";
    default:
      return "an empty value";
  }
}

[[noreturn]] void fail_at(const std::string& source, int line, const std::string& what) {
  throw error(fmt::format("config {}: line {}: {}", source, line, what));
}

// One `name: value` pair of the file being parsed.
struct option {
  const std::string& source;
  const std::string& name;
  int line;  // 1-based, of the option's name
  const YAML::Node& value;

  [[noreturn]] void fail(std::string_view expected) const { fail(expected, describe(value)); }
  [[noreturn]] void fail(std::string_view expected, std::string_view found) const {
    fail_at(source, line, fmt::format("{} must be {}, got {}", name, expected, found));
  }
};

std::string text(const option& opt, std::string_view expected) {
  if (!opt.value.IsScalar()) opt.fail(expected);
  return opt.value.Scalar();
}

uint64_t integer(const option& opt, uint64_t min, uint64_t max, std::string_view unit = {}) {
  std::string expected = max == k_u32_max ? fmt::format("an integer >= {}", min)
                                          : fmt::format("an integer {}..{}", min, max);
  if (!unit.empty()) expected += fmt::format(" ({})", unit);
  std::string s = text(opt, expected);
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v < min || v > max) {
    opt.fail(expected);
  }
  return v;
}

bool boolean(const option& opt) {
  bool v = false;
  if (!YAML::convert<bool>::decode(opt.value, v)) opt.fail("true or false (or yes/no, on/off)");
  return v;
}

std::string resolve(const option& opt, const std::string& p) {
  namespace fs = std::filesystem;
  fs::path dir = fs::absolute(opt.source.empty() ? fs::path(".") : fs::path(opt.source));
  fs::path out = (dir.parent_path() / p).lexically_normal();
  if (!out.has_filename() && out.has_relative_path()) out = out.parent_path();
  return out.string();
}

// Relative paths are anchored at the config file's directory, so that an
// installation in one folder does not depend on the daemon's working directory.
std::string path(const option& opt, bool may_be_empty) {
  constexpr std::string_view expected = "a file system path";
  if (may_be_empty && opt.value.IsNull()) return {};
  std::string p = text(opt, expected);
  if (p.empty()) {
    if (may_be_empty) return {};
    opt.fail(expected);
  }
  if (std::any_of(p.begin(), p.end(), [](unsigned char c) { return is_control(c); })) {
    opt.fail("a file system path without control characters");
  }
  return resolve(opt, p);
}

std::string required_path(const option& opt) { return path(opt, false); }
std::string optional_path(const option& opt) { return path(opt, true); }

std::string log_file(const option& opt) {
  // Salt also takes syslog URLs here (udp://, file:///dev/log); brine writes files only.
  if (opt.value.IsScalar() && opt.value.Scalar().find("://") != std::string::npos) {
    opt.fail("a file path (syslog URLs are not supported)");
  }
  return optional_path(opt);
}

spdlog::level::level_enum log_level(const option& opt) {
  constexpr std::string_view expected =
      "one of garbage, trace, debug, info, warning, error, critical, quiet";
  std::string name = text(opt, expected);
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  auto level = parse_log_level(name);
  if (!level) opt.fail(expected);
  return *level;
}

std::string ip_address(const option& opt) {
  constexpr std::string_view expected = "an IPv4 or IPv6 address (not a host name)";
  std::string s = text(opt, expected);
  unsigned char buf[16];
  if (::inet_pton(AF_INET, s.c_str(), buf) != 1 && ::inet_pton(AF_INET6, s.c_str(), buf) != 1) {
    opt.fail(expected);
  }
  return s;
}

// RFC 1123 labels (plus '_', which internal DNS often has); an all-numeric last
// label is a mistyped IPv4 address, not a name.
bool is_host_name(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  std::string_view label;
  for (size_t start = 0; start <= s.size();) {
    size_t dot = std::min(s.find('.', start), s.size());
    label = s.substr(start, dot - start);
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') {
      return false;
    }
    for (unsigned char c : label) {
      if (!std::isalnum(c) && c != '-' && c != '_') return false;
    }
    start = dot + 1;
  }
  return !std::all_of(label.begin(), label.end(), [](unsigned char c) { return std::isdigit(c); });
}

// The `master` option before master_port is applied: a port of 0 means "none
// given" (0 is never accepted from the file).
constexpr uint16_t k_no_port = 0;
constexpr std::string_view k_address_expected =
    "a host name or IP address, optionally with :port (IPv6 as [address]:port)";

bool is_ipv4(const std::string& s) {
  unsigned char buf[4];
  return ::inet_pton(AF_INET, s.c_str(), buf) == 1;
}

bool is_ipv6(const std::string& s) {
  unsigned char buf[16];
  return ::inet_pton(AF_INET6, s.c_str(), buf) == 1;
}

// Digits only, 1..65535; 0 when not.
uint16_t port_number(std::string_view s) {
  unsigned v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v < 1 || v > 65535) return 0;
  return static_cast<uint16_t>(v);
}

enum class address_fault { none, address, port };

// One entry of `master`: host, host:port, IPv4, IPv4:port, a bare IPv6
// literal, [IPv6] or [IPv6]:port (Salt's syntax). Without a port, m.port is
// left as it is.
address_fault split_master(const std::string& s, master_address& m) {
  if (!s.empty() && s.front() == '[') {
    size_t close = s.find(']');
    if (close == std::string::npos) return address_fault::address;
    std::string host = s.substr(1, close - 1);
    if (!is_ipv6(host)) return address_fault::address;
    std::string_view rest = std::string_view(s).substr(close + 1);
    if (!rest.empty() && rest.front() != ':') return address_fault::address;
    if (!rest.empty()) {
      m.port = port_number(rest.substr(1));
      if (m.port == 0) return address_fault::port;
    }
    m.host = std::move(host);
    return address_fault::none;
  }
  if (is_ipv6(s)) {
    m.host = s;
    return address_fault::none;
  }
  size_t colon = s.find(':');
  if (colon != std::string::npos && s.find(':', colon + 1) != std::string::npos) {
    return address_fault::address;
  }
  std::string host = s.substr(0, colon);
  if (!is_ipv4(host) && !is_host_name(host)) return address_fault::address;
  if (colon != std::string::npos) {
    m.port = port_number(std::string_view(s).substr(colon + 1));
    if (m.port == 0) return address_fault::port;
  }
  m.host = std::move(host);
  return address_fault::none;
}

master_address one_master(const option& opt) {
  master_address m{{}, k_no_port};
  switch (split_master(text(opt, k_address_expected), m)) {
    case address_fault::none:
      return m;
    case address_fault::address:
      opt.fail(k_address_expected);
    case address_fault::port:
      opt.fail("HOST:PORT with PORT an integer 1..65535");
  }
  std::abort();
}

// Items of a list option are reported as "<option> item <n>".
template <class Parse>
void for_each_item(const option& opt, Parse parse) {
  for (size_t i = 0; i < opt.value.size(); ++i) {
    std::string name = fmt::format("{} item {}", opt.name, i + 1);
    YAML::Node item = opt.value[i];
    parse(i, option{opt.source, name, opt.line, item});
  }
}

std::vector<master_address> masters(const option& opt) {
  if (opt.value.IsScalar()) return {one_master(opt)};
  if (!opt.value.IsSequence()) opt.fail(fmt::format("{}, or a list of them", k_address_expected));
  if (opt.value.size() == 0) opt.fail("a non-empty list of masters");
  std::vector<master_address> out;
  for_each_item(opt, [&](size_t, const option& item) { out.push_back(one_master(item)); });
  return out;
}

// Host names compare without case and IP literals by value, so that "Salt"
// and "salt", or "::1" and "0::1", are the same master.
std::string master_key(const master_address& m) {
  unsigned char buf[16];
  if (::inet_pton(AF_INET6, m.host.c_str(), buf) == 1) {
    char out[INET6_ADDRSTRLEN];
    ::inet_ntop(AF_INET6, buf, out, sizeof out);
    return fmt::format("[{}]:{}", out, m.port);
  }
  std::string host = m.host;
  std::transform(host.begin(), host.end(), host.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return fmt::format("{}:{}", host, m.port);
}

master_mode master_type(const option& opt) {
  constexpr std::string_view expected = "str, failover or disable";
  std::string s = text(opt, expected);
  if (s == "str") return master_mode::hot;
  if (s == "failover") return master_mode::failover;
  if (s == "disable") return master_mode::disabled;
  if (s == "func") opt.fail("str, failover or disable (brine does not support Salt's func)");
  opt.fail(expected);
}

// `sqlite` or a PostgreSQL URL. The value is never echoed back in full: a
// mistyped URL may carry a password.
std::string store_url(const option& opt) {
  constexpr std::string_view expected = "sqlite or postgresql://USER@HOST:PORT/DATABASE";
  std::string s = text(opt, expected);
  if (s == "sqlite") return s;
  auto scheme_end = s.find("://");
  std::string scheme = scheme_end == std::string::npos ? std::string() : s.substr(0, scheme_end);
  if (scheme != "postgresql" && scheme != "postgres") {
    opt.fail(expected, scheme.empty() ? std::string("something else") : "a " + scheme + ":// URL");
  }
  std::string rest = s.substr(scheme_end + 3);
  auto at = rest.find('@');
  auto slash = rest.find('/');
  if (at != std::string::npos && (slash == std::string::npos || at < slash) &&
      rest.substr(0, at).find(':') != std::string::npos) {
    fail_at(opt.source, opt.line,
            "store must not hold a password (it would be readable in the config and shown in "
            "messages); put it in the file that store_password_file names, mode 0600");
  }
  return s;
}

return_strategy master_return_strategy(const option& opt) {
  constexpr std::string_view expected = "origin or any";
  std::string s = text(opt, expected);
  if (s == "origin") return return_strategy::origin;
  if (s == "any") return return_strategy::any;
  opt.fail(expected);
}

// Integers that may be negative, in min..max; `expected` says what is allowed.
int64_t signed_integer(const option& opt, int64_t min, int64_t max, std::string_view expected) {
  std::string s = text(opt, expected);
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v < min || v > max) {
    opt.fail(expected);
  }
  return v;
}

int64_t master_tries(const option& opt) {
  constexpr std::string_view expected = "-1 (forever) or an integer >= 1";
  int64_t v = signed_integer(opt, -1, std::numeric_limits<int64_t>::max(), expected);
  if (v == 0) opt.fail(expected);
  return v;
}

std::string srv_domain(const option& opt) {
  constexpr std::string_view expected = "a DNS domain name";
  std::string s = text(opt, expected);
  if (!is_host_name(s)) opt.fail(expected);
  return s;
}

std::string srv_resolver(const option& opt) {
  constexpr std::string_view expected =
      "IP:PORT of a DNS server, with PORT 1..65535 (IPv6 as [address]:port)";
  std::string s = text(opt, expected);
  size_t colon = s.rfind(':');
  if (colon == std::string::npos || port_number(std::string_view(s).substr(colon + 1)) == 0) {
    opt.fail(expected);
  }
  std::string host = s.substr(0, colon);
  bool bracketed = host.size() > 2 && host.front() == '[' && host.back() == ']';
  if (bracketed ? !is_ipv6(host.substr(1, host.size() - 2)) : !is_ipv4(host)) opt.fail(expected);
  return s;
}

std::string minion_id(const option& opt) {
  std::string id = text(opt, "a name");
  // The id names files and directories on the master (pki_dir/minions/<id>).
  if (id.empty()) opt.fail("a non-empty name");
  if (id.size() > k_max_id_length) {
    opt.fail(fmt::format("at most {} characters", k_max_id_length),
             fmt::format("{} characters", id.size()));
  }
  if (id == "." || id == "..") opt.fail("a name other than . or ..");
  for (unsigned char c : id) {
    if (c == '/') opt.fail("a name without '/'");
    if (std::isspace(c) || is_control(c)) {
      opt.fail("a name without whitespace or control characters");
    }
  }
  return id;
}

constexpr std::string_view k_finger_expected =
    "a SHA-256 fingerprint: 32 hex bytes separated by colons (aa:bb:...:ff)";

std::string fingerprint(const option& opt) {
  constexpr std::string_view expected = k_finger_expected;
  if (opt.value.IsNull()) return {};
  std::string f = text(opt, expected);
  if (f.empty()) return f;
  bool ok = f.size() == k_finger_length;
  for (size_t i = 0; ok && i < f.size(); ++i) {
    ok = i % 3 == 2 ? f[i] == ':' : std::isxdigit(static_cast<unsigned char>(f[i])) != 0;
  }
  if (!ok) opt.fail(expected);
  std::transform(f.begin(), f.end(), f.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return f;
}

// The option's value as Salt's YAML loader reads it; too big a value (an
// alias bomb) fails naming the option and its line.
nlohmann::json as_data(const option& opt) {
  try {
    return yaml_to_json(opt.value);
  } catch (const error& e) {
    fail_at(opt.source, opt.line, opt.name + ": " + e.what());
  }
}

// Salt's `grains:`: a mapping, read as Salt's YAML loader reads it.
nlohmann::json grains_map(const option& opt) {
  if (!opt.value.IsMap()) opt.fail("a mapping of grain names to values");
  return as_data(opt);
}

// Salt's ext_pillar: a list of mappings (their interfaces are checked by
// the pillar's host, which knows them).
nlohmann::json ext_pillar(const option& opt) {
  if (opt.value.IsNull()) return nlohmann::json::array();
  if (!opt.value.IsSequence()) {
    opt.fail("a list of one-key mappings, each an interface and its configuration "
             "(- cmd_json: 'echo {}')");
  }
  return as_data(opt);
}

// Any YAML value, read as Salt's loader reads it (checked by its user).
nlohmann::json any_map(const option& opt) {
  if (opt.value.IsNull()) return nlohmann::json::object();
  if (!opt.value.IsMap()) opt.fail("a mapping");
  return as_data(opt);
}

// Salt's file_roots / pillar_roots: environment -> list of directories.
std::map<std::string, std::vector<std::string>> roots(const option& opt) {
  constexpr std::string_view expected = "a mapping of environment to a list of directories";
  if (!opt.value.IsMap()) opt.fail(expected);
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& kv : opt.value) {
    if (!kv.first.IsScalar() || kv.first.Scalar().empty()) opt.fail(expected);
    std::string name = fmt::format("{} environment {}", opt.name, show(kv.first.Scalar()));
    option env{opt.source, name, opt.line, kv.second};
    auto& dirs = out[kv.first.Scalar()];
    if (kv.second.IsScalar()) {
      dirs.push_back(path(env, false));
    } else if (kv.second.IsSequence()) {
      for_each_item(env, [&](size_t, const option& item) { dirs.push_back(path(item, false)); });
    } else {
      env.fail("a list of directories");
    }
  }
  return out;
}

// Salt's fileserver_backend: a list (or one name) of roots and gitfs ("git"
// is Salt's other name for gitfs).
std::vector<std::string> fileserver_backend(const option& opt) {
  constexpr std::string_view expected = "a list of backends: roots, gitfs";
  std::vector<std::string> out;
  auto one = [&](const option& item) {
    std::string name = text(item, expected);
    if (name == "git") name = "gitfs";
    if (name != "roots" && name != "gitfs") item.fail("roots or gitfs", show(name));
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
  };
  if (opt.value.IsScalar()) {
    one(opt);
  } else if (opt.value.IsSequence() && opt.value.size() > 0) {
    for_each_item(opt, [&](size_t, const option& item) { one(item); });
  } else {
    opt.fail(expected);
  }
  return out;
}

std::string branch_name(const option& opt) {
  std::string v = text(opt, "a branch name such as master");
  if (v.empty()) opt.fail("a branch name such as master");
  return v;
}

// A password or passphrase: any text. Never shown: a value of the wrong
// type is described by its kind only (describe()), and a string is never
// wrong.
std::string secret(const option& opt) {
  if (opt.value.IsNull()) return {};
  return text(opt, "a string");
}

// A gitfs remote that is a local path relative to the config file: not a
// URL (scheme://), not absolute, and not SSH's scp-like [user@]host:path (a
// ':' before any '/'), which is how git and libgit2 tell them apart too.
bool relative_git_path(std::string_view url) {
  if (url.find("://") != std::string_view::npos || url.starts_with('/')) return false;
  auto colon = url.find(':');
  return colon == std::string_view::npos || url.find('/') < colon;
}

// Salt's gitfs_remotes: a list of URLs (or paths), each maybe a one-key map
// of the URL to its options, given as a list of one-key maps (Salt's form)
// or as one map: root, mountpoint, base and the credentials (user, password,
// insecure_auth, pubkey, privkey, passphrase). A relative local path is
// resolved against the config file's directory, as every path option is:
// Salt hands it to libgit2 as written, which reads it against the daemon's
// working directory ("/" once daemonized), so the same file would name
// another repository depending on how the master was started.
std::vector<gitfs_remote_config> gitfs_remotes(const option& opt) {
  constexpr std::string_view expected =
      "a list of git URLs or paths, each maybe with options (- URL: [{root: DIR}, "
      "{mountpoint: PATH}, {base: BRANCH}])";
  if (opt.value.IsNull()) return {};
  if (!opt.value.IsSequence()) opt.fail(expected);
  std::vector<gitfs_remote_config> out;
  for_each_item(opt, [&](size_t, const option& item) {
    gitfs_remote_config r;
    if (item.value.IsScalar()) {
      r.url = item.value.Scalar();
    } else if (item.value.IsMap() && item.value.size() == 1) {
      auto kv = *item.value.begin();
      if (!kv.first.IsScalar()) item.fail(expected);
      r.url = kv.first.Scalar();
      std::string name = fmt::format("{} ({})", item.name, r.url);
      auto set_one = [&](const std::string& key, const YAML::Node& value) {
        std::string key_name = fmt::format("{} option {}", name, key);
        option o{item.source, key_name, item.line, value};
        if (key == "insecure_auth") {
          r.insecure_auth = boolean(o);
        } else if (key == "pubkey") {
          r.pubkey = path(o, false);
        } else if (key == "privkey") {
          r.privkey = path(o, false);
        } else if (key == "password") {
          r.password = secret(o);
        } else if (key == "passphrase") {
          r.passphrase = secret(o);
        } else if (key == "user") {
          r.user = text(o, "a user name");
        } else if (key == "root") {
          r.root = text(o, "a directory of the repository");
        } else if (key == "mountpoint") {
          r.mountpoint = text(o, "a salt:// path");
        } else if (key == "base") {
          r.base = text(o, "a branch name");
        } else {
          fail_at(item.source, item.line,
                  fmt::format("{}: unknown per-remote option {}; brine's gitfs takes root, "
                              "mountpoint, base, user, password, insecure_auth, pubkey, privkey "
                              "and passphrase",
                              name, show(key)));
        }
      };
      const YAML::Node& params = kv.second;
      if (params.IsSequence()) {
        for (const auto& p : params) {
          if (!p.IsMap() || p.size() != 1 || !p.begin()->first.IsScalar()) {
            option o{item.source, name, item.line, p};
            o.fail("a one-key map such as {root: DIR}");
          }
          set_one(p.begin()->first.Scalar(), p.begin()->second);
        }
      } else if (params.IsMap()) {
        for (const auto& p : params) {
          if (!p.first.IsScalar()) item.fail(expected);
          set_one(p.first.Scalar(), p.second);
        }
      } else if (!params.IsNull()) {
        option o{item.source, name, item.line, params};
        o.fail("a list of per-remote options such as [{root: DIR}, {base: BRANCH}]");
      }
    } else {
      item.fail(expected);
    }
    if (r.url.empty()) item.fail("a git URL or path", "an empty one");
    if (relative_git_path(r.url)) r.url = resolve(item, r.url);
    out.push_back(std::move(r));
  });
  return out;
}

// Salt's `schedule`: job name -> {function, args (job_args), kwargs
// (job_kwargs), seconds, minutes, hours, days, splay (seconds, or {start,
// end}), run_on_start, maxrunning, enabled}, and a top-level `enabled`.
// Salt's calendar keys (when, cron, once, range, ...) are refused by name:
// brine's runs are periodic, spread by the minion's id.
size_t edit_distance(std::string_view a, std::string_view b);

std::vector<schedule_job> schedule_jobs(const option& opt, bool& all_enabled) {
  if (opt.value.IsNull()) return {};
  if (!opt.value.IsMap()) opt.fail("a mapping of job name to {function: ..., minutes: ...}");
  static const std::vector<std::string_view> keys = {
      "function", "args",  "job_args",     "kwargs",     "job_kwargs", "seconds", "minutes",
      "hours",    "days",  "splay",        "run_on_start", "maxrunning", "enabled"};
  static const std::vector<std::string_view> salt_only = {
      "when",   "cron",       "once",          "once_fmt",          "until",
      "after",  "range",      "returner",      "return_config",     "return_kwargs",
      "return_job", "skip_during_range", "run_after_skip_range", "jid_include",
      "metadata", "splay_start", "seconds_range", "name", "skip_explicit"};
  std::vector<schedule_job> out;
  for (const auto& kv : opt.value) {
    int line = kv.first.Mark().line + 1;
    if (!kv.first.IsScalar() || kv.first.Scalar().empty()) {
      fail_at(opt.source, line, "schedule: a job name must be a word, got " + describe(kv.first));
    }
    const std::string& name = kv.first.Scalar();
    if (name == "enabled") {
      all_enabled = boolean(option{opt.source, "schedule: enabled", line, kv.second});
      continue;
    }
    std::string prefix = fmt::format("schedule job {}", show(name));
    if (!kv.second.IsMap()) {
      fail_at(opt.source, line,
              fmt::format("{} must be a mapping such as {{function: state.apply, minutes: 30}}, "
                          "got {}",
                          prefix, describe(kv.second)));
    }
    schedule_job job;
    job.name = name;
    job.line = line;
    bool has_interval = false;
    std::map<std::string, int> seen;
    for (const auto& p : kv.second) {
      int key_line = p.first.Mark().line + 1;
      std::string key = p.first.IsScalar() ? p.first.Scalar() : describe(p.first);
      std::string key_name = fmt::format("{}: {}", prefix, key);
      option o{opt.source, key_name, key_line, p.second};
      if (std::find(salt_only.begin(), salt_only.end(), key) != salt_only.end()) {
        fail_at(opt.source, key_line,
                fmt::format("{}: {} is a Salt schedule key brine does not take; give the "
                            "interval with seconds, minutes, hours or days (runs are spread "
                            "over it by the minion's id)",
                            prefix, show(key)));
      }
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
        std::string_view best;
        size_t best_distance = 3;
        for (auto k : keys) {
          size_t d = edit_distance(key, k);
          if (d < best_distance) {
            best = k;
            best_distance = d;
          }
        }
        std::string hint = best.empty() ? "" : fmt::format(" (did you mean '{}'?)", best);
        fail_at(opt.source, key_line,
                fmt::format("{}: unknown key {}{}; a job takes function, args (or job_args), "
                            "kwargs (or job_kwargs), seconds, minutes, hours, days, splay, "
                            "run_on_start, maxrunning and enabled",
                            prefix, show(key), hint));
      }
      // args and job_args (Salt's two spellings) are one key.
      std::string canonical = key == "job_args" ? "args" : key == "job_kwargs" ? "kwargs" : key;
      if (auto [it, fresh] = seen.emplace(canonical, key_line); !fresh) {
        fail_at(opt.source, key_line,
                fmt::format("{}: {} is set twice (first on line {}); keep one", prefix, show(key),
                            it->second));
      }
      if (key == "function") {
        std::string f = text(o, "a function name such as state.apply");
        if (f.find('.') == std::string::npos || f.front() == '.' || f.back() == '.') {
          o.fail("MODULE.FUNCTION, such as state.apply or test.ping");
        }
        job.function = f;
      } else if (canonical == "args") {
        if (p.second.IsScalar()) {
          job.args = nlohmann::json::array({as_data(o)});
        } else if (p.second.IsSequence()) {
          job.args = as_data(o);
        } else if (!p.second.IsNull()) {
          o.fail("a list of arguments");
        }
      } else if (canonical == "kwargs") {
        if (p.second.IsMap()) {
          job.kwargs = as_data(o);
        } else if (!p.second.IsNull()) {
          o.fail("a mapping of keyword arguments");
        }
      } else if (key == "seconds" || key == "minutes" || key == "hours" || key == "days") {
        uint64_t unit = key == "seconds" ? 1 : key == "minutes" ? 60 : key == "hours" ? 3600 : 86400;
        std::string s = p.second.IsScalar() ? p.second.Scalar() : "";
        uint64_t v = 0;
        auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (s.empty() || ec != std::errc() || end != s.data() + s.size() ||
            v > 366ull * 86400 / unit) {
          fail_at(opt.source, key_line,
                  fmt::format("{} must be a whole number of {} >= 0 (the interval is their "
                              "sum with the job's other units; at most a year), got {}; write "
                              "e.g. {}: 30",
                              key_name, key, describe(p.second), key));
        }
        job.seconds += v * unit;
        has_interval = true;
      } else if (key == "splay") {
        if (p.second.IsMap()) {
          for (const auto& e : p.second) {
            std::string ek = e.first.IsScalar() ? e.first.Scalar() : "";
            option eo{opt.source, key_name + " " + ek, key_line, e.second};
            if (ek == "start") {
              job.splay_start = static_cast<uint32_t>(integer(eo, 0, 86400, "seconds"));
            } else if (ek == "end") {
              job.splay_end = static_cast<uint32_t>(integer(eo, 0, 86400, "seconds"));
            } else {
              fail_at(opt.source, key_line,
                      fmt::format("{} takes start and end (seconds), got {}", key_name,
                                  show(ek.empty() ? describe(e.first) : ek)));
            }
          }
          if (job.splay_end < job.splay_start) {
            fail_at(opt.source, key_line,
                    fmt::format("{}: end ({}) must not be less than start ({})", key_name,
                                job.splay_end, job.splay_start));
          }
        } else {
          job.splay_end = static_cast<uint32_t>(integer(o, 0, 86400, "seconds"));
        }
      } else if (key == "run_on_start") {
        job.run_on_start = boolean(o);
      } else if (key == "maxrunning") {
        job.maxrunning = static_cast<uint32_t>(integer(o, 1, 1000));
      } else if (key == "enabled") {
        job.enabled = boolean(o);
      }
    }
    if (job.function.empty()) {
      fail_at(opt.source, line,
              fmt::format("{} has no function; add function: MODULE.FUNCTION (e.g. "
                          "function: state.apply)",
                          prefix));
    }
    if (!has_interval) {
      fail_at(opt.source, line,
              fmt::format("{} has no interval; add seconds, minutes, hours or days (e.g. "
                          "minutes: 30)",
                          prefix));
    }
    if (job.seconds == 0) {
      fail_at(opt.source, line,
              fmt::format("{}: its interval is 0 seconds; give seconds, minutes, hours or days "
                          "a count above 0",
                          prefix));
    }
    out.push_back(std::move(job));
  }
  return out;
}

std::string merging_strategy(const option& opt) {
  constexpr std::string_view expected = "one of smart, recurse, aggregate, overwrite, none";
  std::string v = text(opt, expected);
  if (v != "smart" && v != "recurse" && v != "aggregate" && v != "overwrite" && v != "none") {
    opt.fail(expected);
  }
  return v;
}

// An execution module's option (postgres.host, ...): one scalar, kept as
// Salt's loader reads it (a port may be a number).
nlohmann::json module_scalar(const option& opt) {
  if (!opt.value.IsNull() && !opt.value.IsScalar()) opt.fail("one value (a word or a number)");
  return as_data(opt);
}

// Stores the option under its own name in module_options.
template <class Config>
void set_module_option(Config& config, const option& opt) {
  config.module_options[opt.name] = module_scalar(opt);
}

// Stores the option's data (a mapping: the postgres ext_pillar's
// `postgres:` connection) under its own name in module_options.
template <class Config>
void set_module_data(Config& config, const option& opt) {
  if (!opt.value.IsNull() && !opt.value.IsMap()) opt.fail("a mapping (host, port, user, pass, db)");
  config.module_options[opt.name] = as_data(opt);
}

std::string plain_text(const option& opt) {
  if (opt.value.IsNull()) return {};
  return text(opt, "a word");
}

// Where state runs compile: on each minion (Salt's way) or on the master.
std::string state_compile(const option& opt) {
  constexpr std::string_view expected = "minion or master";
  std::string v = text(opt, expected);
  if (v != "minion" && v != "master") opt.fail(expected);
  return v;
}

// A target expression (checked by the master, which knows the syntax).
std::string target_text(const option& opt) {
  constexpr std::string_view expected = "a compound target such as 'G@os:Debian and web*'";
  std::string v = text(opt, expected);
  if (v.empty()) opt.fail(expected);
  return v;
}

// A cluster's name: a word of letters, digits, `-`, `_` and `.`, as it
// appears in messages and the store.
std::string cluster_id(const option& opt) {
  constexpr std::string_view expected = "a name of letters, digits, '-', '_' and '.'";
  std::string v = text(opt, expected);
  if (v.empty() || v.size() > 64 ||
      !std::all_of(v.begin(), v.end(), [](unsigned char c) {
        return std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.';
      })) {
    opt.fail(expected);
  }
  return v;
}

// The other masters' peer ports: HOST or HOST:PORT, one or a list (without a
// port, cluster_port).
std::vector<master_address> cluster_peers(const option& opt) {
  if (opt.value.IsNull()) return {};
  if (opt.value.IsScalar()) return {one_master(opt)};
  if (!opt.value.IsSequence()) opt.fail(fmt::format("{}, or a list of them", k_address_expected));
  std::vector<master_address> out;
  for_each_item(opt, [&](size_t, const option& item) { out.push_back(one_master(item)); });
  return out;
}

// Globs of grain names: one string or a list.
std::string file_client(const option& opt) {
  std::string v = text(opt, "remote or local");
  if (v != "remote" && v != "local") opt.fail("remote or local");
  return v;
}

std::string state_top(const option& opt) {
  std::string v = text(opt, "a file name such as top.sls");
  if (v.empty()) opt.fail("a file name such as top.sls");
  return v;
}

std::string top_merging(const option& opt) {
  constexpr std::string_view expected = "merge, same or merge_all";
  std::string v = text(opt, expected);
  if (v != "merge" && v != "same" && v != "merge_all") opt.fail(expected);
  return v;
}

std::string state_output(const option& opt) {
  constexpr std::string_view expected =
      "full, terse, mixed, changes or filter (or full_id, terse_id, mixed_id, changes_id)";
  std::string v = text(opt, expected);
  for (const char* ok : {"full", "terse", "mixed", "changes", "filter", "full_id", "terse_id",
                         "mixed_id", "changes_id"}) {
    if (v == ok) return v;
  }
  opt.fail(expected);
  return v;
}

std::string hash_type(const option& opt) {
  constexpr std::string_view expected = "md5, sha1, sha224, sha256, sha384 or sha512";
  std::string v = text(opt, expected);
  for (const char* ok : {"md5", "sha1", "sha224", "sha256", "sha384", "sha512"}) {
    if (v == ok) return v;
  }
  opt.fail(expected);
  return v;
}

std::vector<std::string> env_names(const option& opt) {
  constexpr std::string_view expected = "a list of environment names";
  std::vector<std::string> out;
  if (opt.value.IsScalar()) {
    out.push_back(opt.value.Scalar());
  } else if (opt.value.IsSequence()) {
    for (const auto& item : opt.value) {
      if (!item.IsScalar()) opt.fail(expected);
      out.push_back(item.Scalar());
    }
  } else if (!opt.value.IsNull()) {
    opt.fail(expected);
  }
  return out;
}

std::vector<std::string> globs(const option& opt) {
  constexpr std::string_view expected = "a list of globs of grain names";
  if (opt.value.IsScalar()) return {opt.value.Scalar()};
  if (!opt.value.IsSequence()) opt.fail(expected);
  std::vector<std::string> out;
  for_each_item(opt, [&](size_t, const option& item) { out.push_back(text(item, "a glob")); });
  return out;
}

std::vector<std::string> pillar_key_globs(const option& opt) {
  constexpr std::string_view expected = "a list of globs of pillar keys (a.b for nested keys)";
  if (opt.value.IsNull()) return {};
  if (opt.value.IsScalar()) return {opt.value.Scalar()};
  if (!opt.value.IsSequence()) opt.fail(expected);
  std::vector<std::string> out;
  for_each_item(opt, [&](size_t, const option& item) { out.push_back(text(item, "a glob")); });
  return out;
}

// One fingerprint or a list of them (one per master); empty, null or [] is none.
std::vector<std::string> fingerprints(const option& opt) {
  if (!opt.value.IsSequence()) {
    std::string f = fingerprint(opt);
    if (f.empty()) return {};
    return {f};
  }
  std::vector<std::string> out;
  for_each_item(opt, [&](size_t, const option& item) {
    std::string f = fingerprint(item);
    if (f.empty()) item.fail(k_finger_expected);
    auto first = std::find(out.begin(), out.end(), f);
    if (first != out.end()) {
      item.fail(fmt::format("different from item {}", first - out.begin() + 1), f);
    }
    out.push_back(std::move(f));
  });
  return out;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

template <class Config>
using setter = std::function<void(Config&, const option&)>;

template <class Config>
using option_table = std::map<std::string_view, setter<Config>>;

template <class Config>
void warn_unknown(const std::string& source, int line, const std::string& name,
                  const option_table<Config>& table) {
  std::string_view best;
  size_t best_distance = 3;  // suggest only names within two edits
  for (const auto& entry : table) {
    size_t d = edit_distance(name, entry.first);
    if (d < best_distance) {
      best = entry.first;
      best_distance = d;
    }
  }
  std::string hint = best.empty() ? "" : fmt::format(" (did you mean '{}'?)", best);
  spdlog::warn("config {}: line {}: unknown option '{}' ignored{}", source, line, show(name), hint);
}

// Applies every option of the file to `config`; returns the line of each option seen.
// Salt's loader refuses duplicate keys too; silently taking one would hide a mistake.
void check_once(std::map<std::string, int>& seen, const std::string& source, const std::string& name,
                int line) {
  if (auto [it, fresh] = seen.emplace(name, line); !fresh) {
    fail_at(source, line,
            fmt::format("{} is set twice (first on line {}); keep one", show(name), it->second));
  }
}

// Whether a document's events hold any node but a bare null (yaml-cpp's
// LoadAll stops at a null document), and where the document started.
struct document_probe : YAML::EventHandler {
  bool has_node = false;
  int line = 0;  // of the document's first node
  void node_at(const YAML::Mark& mark) {
    if (!std::exchange(has_node, true)) line = mark.line + 1;
  }
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { node_at(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                const std::string&) override {
    node_at(mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    node_at(mark);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    node_at(mark);
  }
  void OnMapEnd() override {}
};

// The line of a second document in `yaml` that holds anything, if any.
// Parses two documents at most: yaml-cpp's LoadAll can keep finding
// documents in some malformed text without end (found by config_fuzz).
std::optional<int> second_document_line(const std::string& yaml) {
  std::istringstream in(yaml);
  YAML::Parser parser(in);
  document_probe first;
  if (!parser.HandleNextDocument(first)) return std::nullopt;
  document_probe second;
  if (!parser.HandleNextDocument(second) || !second.has_node) return std::nullopt;
  return second.line;
}

// One option through its handler. A name the table lacks is a typo, warned
// about and dropped, unless it is an execution module's option
// (`module.option`, e.g. `mysql.host` or `nginx.lookup`) in a config that
// keeps them: Salt keeps every option in opts, where config.get and
// config.option find it, and formulas read their own that way.
template <class Config>
void apply_one(const option_table<Config>& table, Config& config, const option& opt) {
  auto handler = table.find(opt.name);
  if (handler != table.end()) {
    handler->second(config, opt);
    return;
  }
  if constexpr (requires { config.module_options; }) {
    size_t dot = opt.name.find('.');
    if (dot != std::string::npos && dot > 0 && dot + 1 < opt.name.size()) {
      config.module_options[opt.name] = as_data(opt);
      return;
    }
  }
  warn_unknown(opt.source, opt.line, opt.name, table);
}

template <class Config>
std::map<std::string, int> apply(const std::string& yaml, const std::string& source,
                                 const option_table<Config>& table, Config& config) {
  std::map<std::string, int> seen;
  if (auto simple = detail::simple_mapping(yaml)) {
    for (const auto& o : *simple) {
      std::string name(o.name);
      check_once(seen, source, name, o.line);
      YAML::Node value(std::string(o.value));
      value.SetTag("?");  // plain, as the parser tags it
      apply_one(table, config, option{source, name, o.line, value});
    }
    return seen;
  }
  std::vector<YAML::Node> docs;
  try {
    if (auto second = second_document_line(yaml)) {
      fail_at(source, *second, "a second YAML document; put all options in one mapping");
    }
    docs.push_back(YAML::Load(yaml));
  } catch (const YAML::Exception& e) {
    if (e.mark.is_null()) throw error(fmt::format("config {}: invalid YAML: {}", source, e.msg));
    fail_at(source, e.mark.line + 1,
            fmt::format("invalid YAML at column {}: {}", e.mark.column + 1, e.msg));
  }
  if (docs.empty() || docs[0].IsNull()) return seen;
  const YAML::Node& root = docs[0];
  if (!root.IsMap()) {
    fail_at(
        source, root.Mark().line + 1,
        fmt::format("the top level must be a mapping of option: value, got {}", describe(root)));
  }
  for (const auto& kv : root) {
    int line = kv.first.Mark().line + 1;
    if (!kv.first.IsScalar()) {
      fail_at(source, line,
              fmt::format("an option name must be a word, got {}", describe(kv.first)));
    }
    const std::string& name = kv.first.Scalar();
    check_once(seen, source, name, line);
    apply_one(table, config, option{source, name, line, kv.second});
  }
  return seen;
}

template <class Config, class T>
setter<Config> set(T Config::*field, T (*parse)(const option&)) {
  return [=](Config& config, const option& opt) { config.*field = parse(opt); };
}

template <class Config, class T>
setter<Config> set_int(T Config::*field, uint64_t min, uint64_t max, std::string_view unit = {}) {
  return [=](Config& config, const option& opt) {
    config.*field = static_cast<T>(integer(opt, min, max, unit));
  };
}

const option_table<master_config>& master_options() {
  using c = master_config;
  static const option_table<c> table = {
      {"interface", set(&c::interface, ip_address)},
      {"port", set_int(&c::port, 1, 65535)},
      {"pki_dir", set(&c::pki_dir, required_path)},
      {"cachedir", set(&c::cachedir, required_path)},
      {"sock_dir", set(&c::sock_dir, required_path)},
      {"auto_accept", set(&c::auto_accept, boolean)},
      {"autosign_file", set(&c::autosign_file, optional_path)},
      {"autoreject_file", set(&c::autoreject_file, optional_path)},
      {"max_frame_bytes",
       set_int(&c::max_frame_bytes, k_min_frame_bytes, k_max_frame_bytes, "bytes")},
      {"log_file", set(&c::log_file, log_file)},
      {"log_level", set(&c::log_level, log_level)},
      {"keep_jobs", set_int(&c::keep_jobs, 1, k_u32_max, "hours")},
      {"keep_reports", set_int(&c::keep_reports, 1, k_u32_max, "hours")},
      {"worker_threads", set_int(&c::worker_threads, 0, 64)},
      {"max_concurrent_handshakes", set_int(&c::max_concurrent_handshakes, 1, k_u32_max)},
      {"handshake_timeout", set_int(&c::handshake_timeout, 1, k_u32_max, "seconds")},
      {"metrics_port", set_int(&c::metrics_port, 0, 65535)},
      {"metrics_interface", set(&c::metrics_interface, ip_address)},
      // Bounded so that idle + cnt * intvl, in milliseconds, fits TCP_USER_TIMEOUT.
      {"tcp_keepalive", set(&c::tcp_keepalive, boolean)},
      {"tcp_keepalive_idle", set_int(&c::tcp_keepalive_idle, 1, 86400, "seconds")},
      {"tcp_keepalive_cnt", set_int(&c::tcp_keepalive_cnt, 1, 127)},
      {"tcp_keepalive_intvl", set_int(&c::tcp_keepalive_intvl, 1, 3600, "seconds")},
      {"publish_hold", set_int(&c::publish_hold, 1, 86400, "seconds")},
      {"nodegroups", set(&c::nodegroups, any_map)},
      {"file_roots", set(&c::file_roots, roots)},
      {"fileserver_list_cache_time", set_int(&c::fileserver_list_cache_time, 0, 3600, "seconds")},
      {"fileserver_backend", set(&c::fileserver_backend, fileserver_backend)},
      {"gitfs_remotes", set(&c::gitfs_remotes, gitfs_remotes)},
      {"gitfs_base", set(&c::gitfs_base, branch_name)},
      {"gitfs_root", set(&c::gitfs_root, plain_text)},
      {"gitfs_mountpoint", set(&c::gitfs_mountpoint, plain_text)},
      {"gitfs_user", set(&c::gitfs_user, plain_text)},
      {"gitfs_password", set(&c::gitfs_password, secret)},
      {"gitfs_insecure_auth", set(&c::gitfs_insecure_auth, boolean)},
      {"gitfs_pubkey", set(&c::gitfs_pubkey, optional_path)},
      {"gitfs_privkey", set(&c::gitfs_privkey, optional_path)},
      {"gitfs_passphrase", set(&c::gitfs_passphrase, secret)},
      {"pillar_roots", set(&c::pillar_roots, roots)},
      {"pillar_source_merging_strategy", set(&c::pillar_source_merging_strategy, merging_strategy)},
      {"pillar_merge_lists", set(&c::pillar_merge_lists, boolean)},
      {"pillarenv", set(&c::pillarenv, plain_text)},
      {"ext_pillar", set(&c::ext_pillar, ext_pillar)},
      {"ext_pillar_first", set(&c::ext_pillar_first, boolean)},
      {"master_tops", set(&c::master_tops, any_map)},
      {"postgres", set_module_data<c>},
      {"gpg_keydir", set(&c::gpg_keydir, optional_path)},
      {"gpg_decrypt_must_succeed", set(&c::gpg_decrypt_must_succeed, boolean)},
      {"publisher_acl", set(&c::publisher_acl, any_map)},
      {"inventory_pillar_keys", set(&c::inventory_pillar_keys, pillar_key_globs)},
      {"store", set(&c::store, store_url)},
      {"store_password_file", set(&c::store_password_file, optional_path)},
      {"store_failover_wait", set_int(&c::store_failover_wait, 0, 3600, "seconds")},
      {"cluster_id", set(&c::cluster_id, cluster_id)},
      {"cluster_peers", set(&c::cluster_peers, cluster_peers)},
      {"cluster_port", set_int(&c::cluster_port, 1, 65535)},
      {"cluster_pki_dir", set(&c::cluster_pki_dir, required_path)},
      {"cluster_advertise", set(&c::cluster_advertise, plain_text)},
      {"max_concurrent_runs", set_int(&c::max_concurrent_runs, 0, k_u32_max)},
      {"run_retry_after", set_int(&c::run_retry_after, 1, 3600, "seconds")},
      {"schedule_harmonic", set(&c::schedule_harmonic, boolean)},
      {"schedule_harmonic_base", set_int(&c::schedule_harmonic_base, 1, 86400, "seconds")},
      {"state_compile", set(&c::state_compile, state_compile)},
      {"state_compile_target", set(&c::state_compile_target, target_text)},
      {"compile_threads", set_int(&c::compile_threads, 0, 256)},
      {"catalog_cache_max_bytes",
       set_int(&c::catalog_cache_max_bytes, 0, uint64_t{1} << 40, "bytes")},
  };
  return table;
}

const option_table<minion_config>& minion_options() {
  using c = minion_config;
  static const option_table<c> table = {
      {"id", set(&c::id, minion_id)},
      {"master", set(&c::masters, masters)},
      {"master_port", set_int(&c::master_port, 1, 65535)},
      {"master_type", set(&c::master_type, master_type)},
      {"random_master", set(&c::random_master, boolean)},
      {"master_shuffle",
       [](c& config, const option& opt) {
         config.random_master = boolean(opt);
         spdlog::warn(
             "config {}: line {}: master_shuffle is deprecated in favour of "
             "random_master (same meaning); rename it",
             opt.source, opt.line);
       }},
      {"master_failback", set(&c::master_failback, boolean)},
      {"master_failback_interval", set_int(&c::master_failback_interval, 0, k_u32_max, "seconds")},
      {"master_tries", set(&c::master_tries, master_tries)},
      {"retry_dns", set_int(&c::retry_dns, 0, k_u32_max, "seconds")},
      {"master_finger", set(&c::master_fingers, fingerprints)},
      {"master_return_strategy", set(&c::master_return_strategy, master_return_strategy)},
      {"use_srv_records", set(&c::use_srv_records, boolean)},
      {"srv_domain", set(&c::srv_domain, srv_domain)},
      {"srv_resolver", set(&c::srv_resolver, srv_resolver)},
      {"spool_max_bytes",
       set_int(&c::spool_max_bytes, k_min_spool_bytes, k_max_spool_bytes, "bytes")},
      {"grains", set(&c::grains, grains_map)},
      {"grains_blacklist", set(&c::grains_blacklist, globs)},
      {"file_roots", set(&c::file_roots, roots)},
      {"pillar_roots", set(&c::pillar_roots, roots)},
      {"ext_pillar", set(&c::ext_pillar, ext_pillar)},
      {"ext_pillar_first", set(&c::ext_pillar_first, boolean)},
      {"gpg_keydir", set(&c::gpg_keydir, optional_path)},
      {"gpg_decrypt_must_succeed", set(&c::gpg_decrypt_must_succeed, boolean)},
      {"file_client", set(&c::file_client, file_client)},
      {"state_top", set(&c::state_top, state_top)},
      {"top_file_merging_strategy", set(&c::top_file_merging_strategy, top_merging)},
      {"env_order", set(&c::env_order, env_names)},
      {"state_auto_order", set(&c::state_auto_order, boolean)},
      {"master_tops_first", set(&c::master_tops_first, boolean)},
      {"test", set(&c::test, boolean)},
      {"failhard", set(&c::failhard, boolean)},
      {"state_output", set(&c::state_output, state_output)},
      {"state_verbose", set(&c::state_verbose, boolean)},
      {"hosts.file", set(&c::hosts_file, required_path)},
      {"postgres.host", set_module_option<c>},
      {"postgres.port", set_module_option<c>},
      {"postgres.user", set_module_option<c>},
      {"postgres.pass", set_module_option<c>},
      {"postgres.maintenance_db", set_module_option<c>},
      {"postgres", set_module_data<c>},
      {"pki_dir", set(&c::pki_dir, required_path)},
      {"cachedir", set(&c::cachedir, required_path)},
      {"acceptance_wait_time", set_int(&c::acceptance_wait_time, 1, k_u32_max, "seconds")},
      {"acceptance_wait_time_max", set_int(&c::acceptance_wait_time_max, 0, k_u32_max, "seconds")},
      {"master_alive_interval", set_int(&c::master_alive_interval, 1, k_u32_max, "seconds")},
      {"auth_timeout", set_int(&c::auth_timeout, 1, 3600, "seconds")},
      {"job_timeout", set_int(&c::job_timeout, 1, k_u32_max, "seconds")},
      {"http_request_timeout", set_int(&c::http_request_timeout, 1, k_u32_max, "seconds")},
      {"hash_type", set(&c::hash_type, hash_type)},
      {"max_frame_bytes",
       set_int(&c::max_frame_bytes, k_min_frame_bytes, k_max_frame_bytes, "bytes")},
      {"log_file", set(&c::log_file, log_file)},
      {"log_level", set(&c::log_level, log_level)},
      {"schedule",
       [](c& config, const option& opt) {
         config.schedule = schedule_jobs(opt, config.schedule_enabled);
       }},
  };
  return table;
}

// What depends on several options, or on master_port wherever it is written.
void check_minion(const std::string& source, const std::map<std::string, int>& seen,
                  minion_config& config) {
  if (seen.contains("random_master") && seen.contains("master_shuffle")) {
    fail_at(source, std::max(seen.at("random_master"), seen.at("master_shuffle")),
            fmt::format("random_master (line {}) and its deprecated name master_shuffle (line {}) "
                        "are both set; keep random_master",
                        seen.at("random_master"), seen.at("master_shuffle")));
  }
  if (!seen.contains("master")) config.masters = {{"salt", k_no_port}};
  std::vector<std::string> keys;
  for (size_t i = 0; i < config.masters.size(); ++i) {
    master_address& m = config.masters[i];
    if (m.port == k_no_port) m.port = config.master_port;
    keys.push_back(master_key(m));
    auto first = std::find(keys.begin(), keys.end() - 1, keys.back());
    if (first != keys.end() - 1) {
      fail_at(source, seen.at("master"),
              fmt::format("master item {} must be different from item {}, got {}", i + 1,
                          first - keys.begin() + 1, show(m.text())));
    }
  }
  if (config.use_srv_records && config.srv_domain.empty()) {
    fail_at(source, seen.at("use_srv_records"),
            "use_srv_records needs srv_domain (the domain whose _brine._tcp SRV records list the "
            "masters)");
  }
  if (config.use_srv_records) {
    if (seen.contains("master")) {
      spdlog::warn(
          "config {}: line {}: master is ignored: use_srv_records is true, so the masters "
          "come from the SRV records of {}",
          source, seen.at("master"), config.srv_domain);
    }
  } else {
    for (const char* name : {"srv_domain", "srv_resolver"}) {
      if (seen.contains(name)) {
        spdlog::warn("config {}: line {}: {} is ignored without use_srv_records: true", source,
                     seen.at(name), name);
      }
    }
  }
  if (config.master_failback && config.master_type != master_mode::failover) {
    spdlog::warn(
        "config {}: line {}: master_failback applies only to master_type: failover; ignored",
        source, seen.at("master_failback"));
  }
}

std::string read_config(const std::string& path) {
  try {
    return read_file(path);
  } catch (const error& e) {
    throw error(std::string("config ") + e.what());
  }
}

}  // namespace

std::vector<schedule_job> parse_schedule(const std::string& json_text, const std::string& source,
                                         bool& enabled) {
  // JSON is YAML: the config's own checks, and their messages, serve.
  YAML::Node node = YAML::Load(json_text);
  static const std::string name = "schedule";
  try {
    return schedule_jobs(option{source, name, 1, node}, enabled);
  } catch (const error& e) {
    // "config SOURCE: line 1: WHAT": a line means nothing in data.
    std::string what = e.what();
    std::string prefix = fmt::format("config {}: line 1: ", source);
    if (what.starts_with(prefix)) what = what.substr(prefix.size());
    throw error(fmt::format("{}: {}", source, what));
  }
}

bool same_job(const schedule_job& a, const schedule_job& b) {
  return a.name == b.name && a.function == b.function && a.args == b.args && a.kwargs == b.kwargs &&
         a.seconds == b.seconds && a.splay_start == b.splay_start && a.splay_end == b.splay_end &&
         a.run_on_start == b.run_on_start && a.maxrunning == b.maxrunning && a.enabled == b.enabled;
}

bool same_jobs(const std::vector<schedule_job>& a, const std::vector<schedule_job>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), same_job);
}

// Not declared in config.h yet (master_set.cc calls it): the inverse of
// master_address::text(), for a master named in the spool. Without a port,
// the master takes master_address's default port.
std::optional<master_address> parse_master_address(const std::string& text, uint16_t default_port) {
  master_address m{{}, default_port};
  if (split_master(text, m) != address_fault::none) return std::nullopt;
  return m;
}

std::string master_address::text() const {
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

namespace detail {

std::optional<std::vector<simple_option>> simple_mapping(std::string_view yaml) {
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  // Characters that start something other than a plain scalar (YAML 1.2
  // c-indicator), or that yaml-cpp may read differently (a leading '-').
  constexpr std::string_view k_indicators = "-?:,[]{}#&*!|>'\"%@`";
  std::vector<simple_option> out;
  int line = 0;
  size_t at = 0;
  while (at < yaml.size()) {
    size_t end = yaml.find('\n', at);
    if (end == std::string_view::npos) end = yaml.size();
    std::string_view l = yaml.substr(at, end - at);
    at = end + 1;
    ++line;
    for (unsigned char c : l) {
      if (c < 0x20 || c >= 0x7f) return std::nullopt;  // tabs, CR, control, non-ASCII
    }
    size_t first = l.find_first_not_of(' ');
    if (first == std::string_view::npos) continue;  // blank
    if (l[first] == '#') continue;                  // comment
    size_t colon = 0;
    while (colon < l.size() && word(l[colon])) ++colon;
    if (colon == 0 || colon + 1 >= l.size() || l[colon] != ':' || l[colon + 1] != ' ') {
      return std::nullopt;
    }
    std::string_view value = l.substr(colon + 2);
    value.remove_prefix(std::min(value.find_first_not_of(' '), value.size()));
    while (!value.empty() && value.back() == ' ') value.remove_suffix(1);
    if (value.empty() || k_indicators.find(value.front()) != std::string_view::npos ||
        value.back() == ':' || value.find('#') != std::string_view::npos ||
        value.find(": ") != std::string_view::npos || value == "~" || value == "null" ||
        value == "Null" || value == "NULL") {
      return std::nullopt;
    }
    out.push_back({l.substr(0, colon), value, line});
  }
  return out;
}

}  // namespace detail

master_config parse_master_config(const std::string& yaml, const std::string& source) {
  master_config config;
  config.source = source;
  auto seen = apply(yaml, source, master_options(), config);
  for (auto& p : config.cluster_peers) {
    if (p.port == k_no_port) p.port = config.cluster_port;
  }
  if (config.cluster_pki_dir.empty()) config.cluster_pki_dir = config.pki_dir + "/cluster";
  if (config.metrics_port == 0 && seen.contains("metrics_interface")) {
    spdlog::warn("config {}: line {}: metrics_interface is ignored while metrics_port is 0 (off)",
                 source, seen.at("metrics_interface"));
  }
  if (!config.clustered()) {
    for (const char* name : {"cluster_peers", "cluster_pki_dir", "cluster_advertise"}) {
      if (seen.contains(name)) {
        fail_at(source, seen.at(name),
                fmt::format("{} is set but cluster_id is not; set cluster_id (the same on every "
                            "master of the cluster) or remove {}",
                            name, name));
      }
    }
  } else if (config.store == "sqlite") {
    fail_at(source, seen.at("cluster_id"),
            "cluster_id is set but store is sqlite: the masters of a cluster share one "
            "PostgreSQL store; set store: postgresql://USER@HOST:PORT/DATABASE (and "
            "store_password_file) on every master");
  }
  return config;
}

minion_config parse_minion_config(const std::string& yaml, const std::string& source) {
  minion_config config;
  config.source = source;
  auto seen = apply(yaml, source, minion_options(), config);
  if (!seen.contains("id")) config.id = host_name();
  if (config.acceptance_wait_time_max != 0 &&
      config.acceptance_wait_time_max < config.acceptance_wait_time) {
    fail_at(source, seen.at("acceptance_wait_time_max"),
            fmt::format("acceptance_wait_time_max must be 0 or at least acceptance_wait_time ({}), "
                        "got {}",
                        config.acceptance_wait_time, config.acceptance_wait_time_max));
  }
  check_minion(source, seen, config);
  return config;
}

master_config load_master_config(const std::string& path) {
  return parse_master_config(read_config(path), path);
}

minion_config load_minion_config(const std::string& path) {
  return parse_minion_config(read_config(path), path);
}

}  // namespace brine::base
